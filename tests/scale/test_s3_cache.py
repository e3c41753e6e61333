"""A cache whose root is in object storage, against moto's real S3 server on 127.0.0.1; the
scenarios of claims, fencing and leases against eviction also against Azurite (``any_bucket``).
Those that move the store's clock (:class:`~tests.storeclock.StoreClock`, a hook on moto's wire)
run on S3 only."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import torch

from precompute.format.layout import open_store_info
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from service import Cache, ServiceError, StoreInUseError, resolve
from service.cache.builders import BuildRequest
from service.coord.objects import ObjectCoordinator
from service.http.app import create_app
from service.http.paths import SourcePolicy
from tests.objectservers import urls_under
from tests.servers import wait_ready
from tests.service.helpers import (
    SPEC,
    make_source,
    read_log,
    s3_builder,
)
from tests.service.server_util import serving
from tests.storeclock import StoreClock


def ticking(start: float = 1_000_000.0) -> Callable[[], float]:
    counter = itertools.count()
    return lambda: start + next(counter)


def test_an_s3_root_makes_an_object_cache_and_bad_roots_are_named(bucket: str) -> None:
    cache = Cache(f"{bucket}/cache/")
    assert isinstance(cache.coord, ObjectCoordinator) and str(cache.root) == f"{bucket}/cache"
    assert cache.list() == [] and cache.status("a" * 64) == {"key": "a" * 64, "status": "absent"}
    with pytest.raises(ServiceError, match="s3://no-such-bucket-x/c/claims: LIST failed"):
        Cache("s3://no-such-bucket-x/c")


def _dead_holder() -> bytes:
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return json.dumps({"host": socket.gethostname(), "pid": dead.pid, "token": "x"}).encode()


def test_one_of_many_callers_takes_a_dead_claim_over(any_bucket: str, tmp_path: Path) -> None:
    bucket = any_bucket
    source, log = make_source(tmp_path / "src"), tmp_path / "log"
    cache = Cache(f"{bucket}/cache", builder=s3_builder(log, delay=0.3))
    key = cache.key_for(source, SPEC)
    location(f"{bucket}/cache/claims/{key}.json").write_bytes(_dead_holder())  # a dead builder's
    assert cache.status(key)["status"] == "interrupted"
    paths: list[str] = []
    threads = [
        threading.Thread(target=lambda: paths.append(str(cache.get_or_build(source, SPEC))))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(read_log(log)) == 1 and len(set(paths)) == 1 and len(paths) == 6
    assert urls_under(f"{bucket}/cache/claims/{key}.json.takeover") != []
    assert cache.status(key)["status"] == "ready"


def test_an_unpublished_store_is_never_served_and_gc_cleans_it(bucket: str, tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    cache = Cache(f"{bucket}/cache", builder=s3_builder())
    request = cache.request_for(source, SPEC)
    s3_builder()(request)  # a complete store under stores/<key>/ but no entry: not published
    assert cache.get(request.key) is None and cache.list() == []
    assert cache.gc().cleaned == (f"stores/{request.key}",)
    assert urls_under(str(request.out)) == []


def test_eviction_keeps_the_budget_lru_and_leased_stores(any_bucket: str, tmp_path: Path) -> None:
    bucket = any_bucket
    cache = Cache(f"{bucket}/cache", builder=s3_builder(), clock=ticking())
    sources = [make_source(tmp_path / f"src{i}", seed=i) for i in range(3)]
    keys = [cache.key_for(s, SPEC) for s in sources]
    for s in sources:
        cache.get_or_build(s, SPEC)
    size = max(e.size_bytes for e in cache.list())
    assert cache.get(keys[0]) is not None  # LRU order now: keys[1], keys[2], keys[0]
    with cache.open(keys[1]) as leased:  # a use too: keys[2], keys[0], keys[1]
        assert str(leased) == f"{bucket}/cache/stores/{keys[1]}"
        assert cache.gc(budget_bytes=2 * size).evicted == (keys[2],)  # the LRU one only
        report = cache.gc(budget_bytes=0)
        assert report.evicted == (keys[0],) and report.skipped_leased == (keys[1],)
        with pytest.raises(StoreInUseError, match=f"store {keys[1]} is leased by a reader"):
            cache.remove(keys[1])
    assert urls_under(f"{bucket}/cache/stores/{keys[2]}") == []
    assert cache.get(keys[2]) is None
    assert cache.remove(keys[1]).key == keys[1] and cache.list() == []


def test_a_dead_readers_lease_is_ignored(bucket: str, tmp_path: Path) -> None:
    cache = Cache(f"{bucket}/cache", builder=s3_builder())
    source = make_source(tmp_path / "src")
    key = cache.key_for(source, SPEC)
    cache.get_or_build(source, SPEC)
    location(f"{bucket}/cache/leases/{key}/dead.json").write_bytes(_dead_holder())
    assert cache.gc(budget_bytes=0).evicted == (key,)
    assert urls_under(f"{bucket}/cache/leases/{key}") == []


def test_build_after_budget_evicts_others_not_the_new_store(bucket: str, tmp_path: Path) -> None:
    cache = Cache(f"{bucket}/cache", budget_bytes=1, builder=s3_builder(), clock=ticking())
    first, second = make_source(tmp_path / "a", seed=1), make_source(tmp_path / "b", seed=2)
    cache.get_or_build(first, SPEC)
    cache.get_or_build(second, SPEC)
    assert [e.key for e in cache.list()] == [cache.key_for(second, SPEC)]


def test_resolve_and_store_loader_stream_from_an_s3_cache(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loaders.torch_loader import StoreLoader

    source = make_source(tmp_path / "src")
    root = f"{bucket}/cache"
    key = Cache(root, builder=s3_builder()).get_or_build(source, SPEC).name
    with StoreLoader(key, batch_size=4, shuffle=False, cache_root=root) as loader:
        assert str(loader.source.info.path) == f"{root}/stores/{key}"
        seen = []
        for batch in loader:
            for image, index in zip(batch["image"], batch["index"], strict=True):
                assert torch.all(image == int(index) % 251)  # pixels encode the slot index
                seen.append(int(index))
        assert sorted(seen) == list(range(12))
        assert urls_under(f"{root}/leases/{key}") != []  # leased while open
    assert urls_under(f"{root}/leases/{key}") == []
    monkeypatch.setenv("NOSTALL_CACHE", root)
    path, lease = resolve(key)
    with lease:
        assert str(path) == f"{root}/stores/{key}"


def test_http_api_over_an_s3_cache_root(bucket: str, tmp_path: Path) -> None:
    make_source(tmp_path / "data" / "ds")
    put_folder(make_source(tmp_path / "s3ds"), f"{bucket}/raw/ds")
    cache = Cache(f"{bucket}/cache", builder=s3_builder())
    policy = SourcePolicy([tmp_path / "data", f"{bucket}/raw"])
    with serving(create_app(cache, policy)) as url, httpx.Client(base_url=url, timeout=30) as c:
        keys = []
        for source in ("ds", f"{bucket}/raw/ds"):
            r = c.post("/stores", json={"source": source, "spec": SPEC})
            assert r.status_code == 202, r.text
            doc = wait_ready(c, r.json()["key"])
            assert doc["status"] == "ready" and doc["path"].startswith(f"{bucket}/cache/stores/")
            assert c.post("/stores", json={"source": source, "spec": SPEC}).status_code == 200
            keys.append(r.json()["key"])
        listed = c.get("/stores").json()
        assert sorted(s["key"] for s in listed["stores"]) == sorted(keys)
        assert "nostall_cache_stores 2" in c.get("/metrics").text
        page = c.get("/").text  # the status page reads an s3:// root as the JSON routes do
        assert f'<code id="root">{bucket}/cache</code>' in page
        assert all(f'<tr class="store" id="store-{key}">' in page for key in keys)
        with cache.open(keys[0]):
            assert c.delete(f"/stores/{keys[0]}").status_code == 409
        assert c.delete(f"/stores/{keys[0]}").json()["removed"]["key"] == keys[0]
        assert c.get(f"/stores/{keys[0]}").status_code == 404


def test_cli_takes_an_s3_cache(bucket: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from service.cli import cache as cache_cli

    source = make_source(tmp_path / "src")
    root = f"{bucket}/cache"
    key = Cache(root, builder=s3_builder()).get_or_build(source, SPEC).name
    result = CliRunner().invoke(cache_cli, ["--cache", root, "ls", "--json"])
    assert result.exit_code == 0, result.output
    assert [e["key"] for e in json.loads(result.output)] == [key]
    result = CliRunner().invoke(cache_cli, ["--cache", root, "rm", key[:8]])
    assert result.exit_code == 0 and result.output.startswith(f"removed {key[:12]}")
    result = CliRunner().invoke(cache_cli, ["--cache", "s3://", "ls"])
    assert result.exit_code == 1 and result.output == "Error: s3://: not an s3://bucket/key URL\n"
    (tmp_path / "file").write_text("x")  # --root takes URLs now; a file is still refused
    result = CliRunner().invoke(cache_cli, ["--root", str(tmp_path / "file"), "ls"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cache root {tmp_path / 'file'}: not a folder")


@pytest.mark.ray
@pytest.mark.slow
def test_the_real_builder_writes_into_an_s3_cache(
    bucket: str, ray_local: object, tmp_path: Path
) -> None:
    from service import precompute_builder

    source = make_source(tmp_path / "src", num_images=20)
    cache = Cache(f"{bucket}/cache", builder=precompute_builder())
    path = cache.get_or_build(source, SPEC)  # precompute.job.build on Ray, --out s3://...
    info = open_store_info(path)
    assert info.num_valid == 20 and info.attrs["report"]["builder"] == "precompute.job"
    assert not location(f"{path}/_nostall/build.lock").exists()
    assert cache.info(path.name).size_bytes == sum(m.size for m in path.list().values())
    assert cache.get_or_build(str(source), SPEC) == path and cache.stats.snapshot()["builds"] == 1


def _until_changed(url: str, etag: str, timeout: float = 60.0) -> str:
    """Wait for a new version of ``url`` (a beat); return its ETag."""
    deadline = time.monotonic() + timeout
    while (now := location(url).head().version) == etag:
        assert time.monotonic() < deadline, f"{url} was not re-PUT in {timeout} s"
        time.sleep(0.05)
    return now


def test_a_claim_beats_while_held_and_one_of_another_host_that_stops_is_taken_over(
    bucket: str, tmp_path: Path, store_clock: StoreClock
) -> None:
    from service.coord.objclaim import try_claim

    url = f"{bucket}/cache/claims/x.json"
    with try_claim(location(url), beat_s=0.1):
        second = _until_changed(url, location(url).head().version)  # re-PUT while held
        _until_changed(url, second)  # and again
    assert not location(url).exists()  # deleted on release
    source, log = make_source(tmp_path / "src"), tmp_path / "log"
    cache = Cache(f"{bucket}/cache", builder=s3_builder(log), lock_timeout=1.0)
    cache.claim_stale_s = 30.0
    key = cache.key_for(source, SPEC)
    elsewhere = {"host": "another-host", "pid": 1, "token": "t", "beat": 0}
    location(f"{bucket}/cache/claims/{key}.json").write_bytes(json.dumps(elsewhere).encode())
    assert cache.status(key)["status"] == "building"  # a live pid there, for all we know
    with pytest.raises(ServiceError, match="timed out after 1 s waiting for the build of"):
        cache.get_or_build(source, SPEC)  # beaten under 30 s ago by the store's clock: live
    assert not log.exists() or read_log(log) == []
    store_clock.advance(60)  # no beat for 60 s by the store's clock: dead
    cache.get_or_build(source, SPEC)
    assert len(read_log(log)) == 1


def test_a_lease_of_another_host_counts_until_it_stops_beating(
    bucket: str, tmp_path: Path, store_clock: StoreClock
) -> None:
    cache = Cache(f"{bucket}/cache", builder=s3_builder(), clock=ticking())
    cache.claim_beat_s, cache.claim_stale_s = 0.3, 30.0
    first, second = make_source(tmp_path / "a", seed=1), make_source(tmp_path / "b", seed=2)
    k1, k2 = cache.key_for(first, SPEC), cache.key_for(second, SPEC)
    cache.get_or_build(first, SPEC)
    cache.get_or_build(second, SPEC)
    elsewhere = {"host": "another-host", "pid": 1, "token": "t", "beat": 0}
    location(f"{bucket}/cache/leases/{k1}/t.json").write_bytes(json.dumps(elsewhere).encode())
    with cache.open(k2):  # held here, re-PUT every 0.3 s
        assert cache.gc(budget_bytes=0).skipped_leased == (k1, k2)  # both fresh
        ours = f"{bucket}/cache/leases/{k2}"
        before = {url: location(url).head().version for url in urls_under(ours)}
        store_clock.advance(60)  # the foreign lease is now older than 30 s, ours too
        assert len(before) == 1
        for url, etag in before.items():
            _until_changed(url, etag)  # ours re-PUT since: fresh again
        report = cache.gc(budget_bytes=0)
        assert report.evicted == (k1,) and report.skipped_leased == (k2,)
    assert urls_under(f"{bucket}/cache/leases") == []
    assert cache.gc(budget_bytes=0).evicted == (k2,)


def test_a_builder_that_lost_its_claim_while_building_publishes_no_entry(
    any_bucket: str, tmp_path: Path
) -> None:
    """A builder stalled past stale_s: another took the claim over; the late one must not
    publish an entry for a store the taker now owns."""
    source, root = make_source(tmp_path / "src"), f"{any_bucket}/cache"
    inner = s3_builder()

    def stalled(request: BuildRequest) -> None:
        inner(request)  # then, as if it stalled: another builder takes the key's claim over
        taker = {"host": "another-host", "pid": 1, "token": "taker", "beat": 0}
        cache.layout.claim_file(request.key).write_bytes(json.dumps(taker).encode())

    cache = Cache(root, builder=stalled)
    assert isinstance(cache.coord, ObjectCoordinator)
    with pytest.raises(ServiceError, match=r"its claim .* was taken over by another builder"):
        cache.get_or_build(source, SPEC)
    assert cache.list() == []  # no entry: the key is the taker's to publish
    claim = cache.layout.claim_file(cache.key_for(source, SPEC))
    assert json.loads(claim.read_bytes())["token"] == "taker"  # left to it
