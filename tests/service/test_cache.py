"""Cache behaviour in one process: hits, catalog, removal, LRU eviction, leases, failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import zarr

from precompute.format.layout import open_store_info
from service import BuildFailedError, BuildRequest, Cache, CacheKeyError, StoreInUseError, resolve
from tests.service.helpers import SPEC, index_builder, make_source, read_log


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return make_source(tmp_path / "src")


class Ticks:
    """A cache clock that moves on one second per reading: each use is later than the last."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _cache(tmp_path: Path, **kw: object) -> tuple[Cache, Path]:
    log = tmp_path / "builds.log"
    kw.setdefault("clock", Ticks())
    return Cache(tmp_path / "cache", builder=index_builder(log), **kw), log  # type: ignore[arg-type]


def test_build_once_then_hit(tmp_path: Path, source: Path) -> None:
    cache, log = _cache(tmp_path)
    first = cache.get_or_build(source, SPEC)
    second = cache.get_or_build(str(source), dict(SPEC))
    assert first == second == cache.root / "stores" / cache.key_for(source, SPEC)
    assert len(read_log(log)) == 1
    info = open_store_info(first)
    assert info.layout.num_samples == 12
    image = zarr.open_array(str(first / "image"), mode="r")[:]
    assert all((image[i] == i % 251).all() for i in range(12))
    assert cache.stats.snapshot() == {
        "hits": 1,
        "misses": 1,
        "builds": 1,
        "build_failures": 0,
        "evictions": 0,
        "removals": 0,
    }
    assert not list((cache.root / "building").iterdir())


def test_catalog_get_info_list_remove(tmp_path: Path, source: Path) -> None:
    clock = Ticks()
    cache, _ = _cache(tmp_path, clock=clock)
    path = cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    entry = cache.info(key)
    assert entry.created == entry.last_access == clock.now  # published: its first use
    assert entry.path == path and entry.source == str(source.resolve())
    assert entry.spec["size"] == 16 and entry.num_samples == 12
    assert entry.size_bytes > 12 * 16 * 16 * 3
    assert [e.key for e in cache.list()] == [key]
    assert cache.get(key) == path
    assert cache.info(key).last_access == clock.now == entry.created + 1  # a hit is a use
    assert cache.status(key)["status"] == "ready"
    assert cache.remove(key).key == key
    assert cache.get(key) is None and not path.exists() and cache.list() == []
    assert cache.status(key) == {"key": key, "status": "absent"}
    with pytest.raises(CacheKeyError, match=key):
        cache.remove(key)
    with pytest.raises(CacheKeyError):
        cache.info(key)


def _three_stores(cache: Cache, source: Path) -> list[str]:
    keys = []
    for seed in range(3):
        cache.get_or_build(source, {**SPEC, "seed": seed})
        keys.append(cache.key_for(source, {**SPEC, "seed": seed}))
    return keys


def test_lru_eviction_order(tmp_path: Path, source: Path) -> None:
    cache, _ = _cache(tmp_path)
    a, b, c = _three_stores(cache, source)
    for key in (b, a, c):  # b is now the least recently used
        assert cache.get(key) is not None
    assert [e.key for e in cache.list()] == [c, a, b]  # most recently used first
    size = cache.info(a).size_bytes
    report = cache.gc(budget_bytes=2 * size + size // 2)
    assert report.evicted == (b,) and report.freed_bytes == size
    assert cache.get(b) is None and cache.get(a) and cache.get(c)
    report = cache.gc(budget_bytes=0)
    assert set(report.evicted) == {a, c} and cache.list() == []
    assert cache.stats.snapshot()["evictions"] == 3


def test_budget_is_enforced_after_each_build(tmp_path: Path, source: Path) -> None:
    cache, _ = _cache(tmp_path)
    cache.get_or_build(source, SPEC)
    size = cache.list()[0].size_bytes
    budgeted = Cache(
        cache.root, budget_bytes=size + size // 2, builder=index_builder(), clock=cache.clock
    )
    budgeted.get_or_build(source, {**SPEC, "seed": 5})
    assert [e.spec["seed"] for e in budgeted.list()] == [5]


def test_lease_blocks_eviction_and_removal(tmp_path: Path, source: Path) -> None:
    cache, _ = _cache(tmp_path)
    keys = _three_stores(cache, source)
    with cache.open(keys[0]) as path:  # the oldest store, leased
        assert path.is_dir()
        report = cache.gc(budget_bytes=0)
        assert report.skipped_leased == (keys[0],) and set(report.evicted) == set(keys[1:])
        with pytest.raises(StoreInUseError, match=keys[0]):
            cache.remove(keys[0])
        assert open_store_info(path).layout.num_samples == 12
    assert cache.gc(budget_bytes=0).evicted == (keys[0],)


def test_open_by_source_and_spec_and_resolve(tmp_path: Path, source: Path) -> None:
    cache, log = _cache(tmp_path)
    with cache.open((str(source), SPEC)) as path:
        assert open_store_info(path).spec.size == 16
    path2, lease = resolve({"source": str(source), "spec": SPEC}, cache=cache)
    with lease:
        assert path2 == path and lease.held
        assert cache.gc(budget_bytes=0).evicted == ()
    assert not lease.held and len(read_log(log)) == 1
    with pytest.raises(CacheKeyError):
        resolve("0" * 64, cache=cache)
    with pytest.raises(TypeError, match="reference"):
        resolve(42, cache=cache)  # type: ignore[arg-type]


def _failing(request: BuildRequest) -> None:
    raise RuntimeError("decoder exploded")


def _incomplete(request: BuildRequest) -> None:
    index_builder()(request)
    meta = request.out / "zarr.json"
    meta.write_text(meta.read_text().replace('"complete": true', '"complete": false'))


def _wrong_source(request: BuildRequest) -> None:
    index_builder()(BuildRequest(request.key, request.source, request.spec, request.out, "other"))


@pytest.mark.parametrize(
    ("builder", "match"),
    [(_failing, "decoder exploded"), (_incomplete, "incomplete"), (_wrong_source, "fingerprint")],
)
def test_failed_builds_publish_nothing_and_retry(
    tmp_path: Path, source: Path, builder: object, match: str
) -> None:
    bad = Cache(tmp_path / "cache", builder=builder)  # type: ignore[arg-type]
    with pytest.raises(BuildFailedError, match=match):
        bad.get_or_build(source, SPEC)
    key = bad.key_for(source, SPEC)
    assert bad.list() == [] and bad.get(key) is None
    assert not (bad.root / "stores" / key).exists()
    assert bad.stats.snapshot()["build_failures"] == 1
    good, log = _cache(tmp_path)
    assert open_store_info(good.get_or_build(source, SPEC)).attrs["complete"]
    assert len(read_log(log)) == 1


def test_uncatalogued_complete_store_is_adopted_not_rebuilt(tmp_path: Path, source: Path) -> None:
    cache, log = _cache(tmp_path)
    path = cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    cache.layout.entry_file(key).unlink()  # as if the builder died between rename and entry
    assert cache.get(key) is None
    assert cache.get_or_build(source, SPEC) == path and len(read_log(log)) == 1
    assert cache.info(key).num_valid == 12 and cache.stats.snapshot()["builds"] == 2


def test_store_bigger_than_the_budget_is_returned_not_evicted(tmp_path: Path, source: Path) -> None:
    cache, _ = _cache(tmp_path, budget_bytes=1)
    path = cache.get_or_build(source, SPEC)
    assert open_store_info(path).num_valid == 12
    cache.get_or_build(source, {**SPEC, "seed": 1})
    assert not path.exists() and len(cache.list()) == 1


def test_orphans_of_a_crash_are_cleaned_never_served(tmp_path: Path, source: Path) -> None:
    cache, log = _cache(tmp_path)
    path = cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    cache.layout.entry_file(key).unlink()  # as if the builder died between rename and entry
    assert cache.get(key) is None
    assert cache.gc().cleaned == (f"stores/{key}",) and not path.exists()
    assert cache.get_or_build(source, SPEC) == path and len(read_log(log)) == 2


def test_entry_without_store_is_a_miss_and_rebuilds(tmp_path: Path, source: Path) -> None:
    cache, log = _cache(tmp_path)
    path = cache.get_or_build(source, SPEC)
    shutil.rmtree(path)
    assert cache.get(cache.key_for(source, SPEC)) is None
    assert cache.get_or_build(source, SPEC) == path and len(read_log(log)) == 2
    assert open_store_info(path).num_valid == 12


def test_budget_must_be_non_negative(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="budget_bytes"):
        Cache(tmp_path, budget_bytes=-1)
