"""StoreLoader over real object servers: ranged GETs, crc32c, local read-through cache.

The scenarios run on the S3-compatible server (moto) and on the Azure Blob one (Azurite); those
that count or alter requests on the wire (:mod:`tests.s3wire`) on the S3 one only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.errors import ChunkReadError, CorruptChunkError, StoreOpenError
from loaders.store.readcache import ReadCache
from precompute.errors import StoreError
from precompute.format.shardcodec import chunk_sound
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from tests.contracts.index_store import index_images
from tests.contracts.loader_contract import (
    Epochs,
    assert_same_epochs,
    make_index_store,
    serve_epochs,
)
from tests.s3wire import WIRE, WireRequest

NUM = 90  # 6 shards of 16 (the last one cut), chunks of 4


@pytest.fixture(scope="module")
def local_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("s3l") / "store", NUM, holes=(3, 40))


@pytest.fixture
def s3_store(bucket: str, local_store: Path) -> str:
    url = f"{bucket}/stores/train.zarr"
    put_folder(local_store, url)
    return url


@pytest.fixture
def any_store(any_bucket: str, local_store: Path) -> str:
    url = f"{any_bucket}/stores/train.zarr"
    put_folder(local_store, url)
    return url


def _epochs(store: Any, epochs: int = 2, **kw: Any) -> Epochs:
    loader = StoreLoader(store, batch_size=8, seed=3, num_threads=4, prefetch=1, **kw)
    return serve_epochs(loader, epochs)


def test_any_store_streams_the_same_batches_as_the_local_one(
    any_store: str, local_store: Path
) -> None:
    assert_same_epochs(_epochs(any_store), _epochs(local_store))


def test_chunks_are_ranged_gets_and_epoch_two_reads_the_local_cache(
    s3_store: str, local_store: Path, tmp_path: Path
) -> None:
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    loader = StoreLoader(s3_store, batch_size=8, seed=3, num_threads=4, read_cache=cache)
    with WIRE.count() as seen:  # the requests the server answers, by operation and key
        first = [b["image"].numpy() for b in loader]
    chunk_bytes = loader.source.image.meta.chunk_nbytes + 4
    requests = sum(n for (op, key), n in seen.items() if op == "GetObject" and "/image/" in key)
    chunks = -(-NUM // 4)
    assert cache.cached_bytes == chunks * chunk_bytes  # every chunk once, whole
    # + one tail GET per shard index (two threads may race to fetch the same one)
    assert chunks + 6 <= requests <= chunks + 2 * 6
    loader.set_epoch(1)
    with WIRE.count() as again:
        second = [b["image"].numpy() for b in loader]
    loader.close()
    assert again == {}  # nothing fetched, nothing listed
    assert cache.hits >= NUM // 4 - 1 and len(first) == len(second)


def test_read_cache_keeps_its_budget_evicting_least_recently_used(tmp_path: Path) -> None:
    cache = ReadCache(tmp_path / "c", 250)
    for i in range(5):
        cache.put(f"{i:064x}", bytes([i]) * 100)
    assert cache.cached_bytes == 200
    assert cache.get(f"{0:064x}") is None and cache.get(f"{4:064x}") == bytes([4]) * 100
    assert sorted(p.name for p in (tmp_path / "c").glob("??/*")) == [f"{3:064x}", f"{4:064x}"]
    again = ReadCache(tmp_path / "c", 150)  # a later run adopts the folder, within its budget
    assert again.cached_bytes == 100 and again.get(f"{4:064x}") == bytes([4]) * 100


def test_a_damaged_cache_entry_is_fetched_again(
    any_store: str, local_store: Path, tmp_path: Path
) -> None:
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    _epochs(any_store, 1, read_cache=cache)
    for entry in (tmp_path / "cache").glob("??/*"):
        data = bytearray(entry.read_bytes())
        data[5] ^= 0xFF
        entry.write_bytes(bytes(data))
    assert_same_epochs(
        _epochs(any_store, 1, read_cache=ReadCache(tmp_path / "cache", 1 << 30)),
        _epochs(local_store, 1),
    )


def test_a_corrupt_chunk_object_raises_naming_url_and_chunk(any_store: str) -> None:
    shard = f"{any_store}/image/c/1/0/0/0"
    data = bytearray(location(shard).read_bytes())
    data[100] ^= 0x01  # inside the first inner chunk of shard 1
    location(shard).write_bytes(bytes(data))
    with pytest.raises(
        CorruptChunkError,
        match=r"image: shard file (s3|az)://.*/image/c/1/0/0/0, "
        r"chunk \(4, 0, 0, 0\): crc32c checksum mismatch",
    ):
        _epochs(any_store, 1)


def test_a_corrupt_chunk_never_enters_the_read_cache(any_store: str, tmp_path: Path) -> None:
    shard = f"{any_store}/image/c/1/0/0/0"
    data = bytearray(location(shard).read_bytes())
    data[100] ^= 0x01  # inside the first inner chunk of shard 1
    location(shard).write_bytes(bytes(data))
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    loader = StoreLoader(any_store, 8, seed=0, shuffle=False, read_cache=cache)
    with pytest.raises(CorruptChunkError, match="crc32c checksum mismatch"):
        for _ in loader:
            pass
    loader.close()
    cached = [p.read_bytes() for p in (tmp_path / "cache").glob("??/*")]
    assert cached  # the sound chunks read before it were cached
    assert all(chunk_sound(entry) for entry in cached)  # and only sound ones


def test_a_missing_or_cut_shard_object_is_refused_at_open(any_store: str) -> None:
    shard = f"{any_store}/label/c/2"
    location(shard).write_bytes(location(shard).read_bytes()[:-3])
    with pytest.raises(
        StoreOpenError, match=r"shard 2: label: shard file (s3|az)://.*/label/c/2 has"
    ):
        StoreLoader(any_store, batch_size=8)
    location(shard).delete()
    with pytest.raises(StoreOpenError, match=r"shard 2: label: shard file is missing"):
        StoreLoader(any_store, batch_size=8)


def test_errors_name_the_url_and_never_the_secret(bucket: str) -> None:
    with pytest.raises(StoreOpenError, match=rf"{bucket}/nothing-here") as info:
        StoreLoader(f"{bucket}/nothing-here", batch_size=8)
    assert "nostall-test-secret" not in str(info.value)
    with pytest.raises(StoreError, match="not an s3://bucket/key URL"):
        location("s3:///no-bucket")


def test_an_object_replaced_while_reading_fails_instead_of_mixing_versions(any_store: str) -> None:
    loader = StoreLoader(any_store, batch_size=8, seed=3, num_threads=2)
    list(loader)  # every shard index read, with its object's ETag
    one, two = f"{any_store}/image/c/1/0/0/0", f"{any_store}/image/c/2/0/0/0"
    location(one).write_bytes(location(two).read_bytes())  # same size, another version
    loader.set_epoch(1)
    with pytest.raises(ChunkReadError, match=r"image/c/1/0/0/0.*replaced while the store"):
        list(loader)
    loader.close()


def test_small_arrays_are_read_whole_one_get_per_shard(s3_store: str, local_store: Path) -> None:
    from loaders.store.shardio import ShardedArrayReader

    for name in ("label", "extent"):
        remote = ShardedArrayReader(f"{s3_store}/{name}", complete=True)
        local = ShardedArrayReader(local_store / name, complete=True)
        with WIRE.count() as seen:
            whole = remote.read_all()
        np.testing.assert_array_equal(whole, local.read_all())
        assert sum(seen.values()) == 6  # one GET per shard, not 23 chunks


def test_a_store_rebuilt_at_the_same_url_never_reads_old_cache_entries(
    any_bucket: str, local_store: Path, tmp_path: Path
) -> None:
    """docs/scale.md: a rebuilt store (new ETags) never hits the entries of the old one."""
    images = index_images(NUM, 16)
    images[..., 2] = 200  # same layout and sizes, other bytes in every chunk
    labels = (np.arange(NUM) % 7).astype(np.int64)[::-1].copy()
    other = tmp_path / "other.zarr"
    write_store_from_arrays(
        other, images, labels, BuildSpec(size=16, chunk_samples=4, shard_samples=16)
    )
    url = f"{any_bucket}/stores/rebuilt.zarr"
    put_folder(local_store, url)
    folder = tmp_path / "cache"
    first = ReadCache(folder, 1 << 30)
    assert_same_epochs(_epochs(url, 1, read_cache=first), _epochs(local_store, 1))
    assert first.cached_bytes > 0 and first.hits == 0
    for old in location(url).list():  # the store deleted, another built at its URL
        location(url).store.delete(old)
    put_folder(other, url)
    again = ReadCache(folder, 1 << 30)  # the same folder, adopted with the old store's entries
    assert again.cached_bytes == first.cached_bytes
    assert_same_epochs(_epochs(url, 1, read_cache=again), _epochs(other, 1))
    assert again.hits == 0  # no chunk of the old store was served
    assert_same_epochs(_epochs(url, 1, read_cache=again), _epochs(other, 1))
    assert again.hits > 0  # and the new store's own entries are used


@pytest.fixture
def if_match_ignored(s3_server: str) -> Any:
    """The object server ignores ``If-Match`` on GET, as some S3-compatible servers do: the
    header is taken off every GetObject request the server receives."""

    stripped: list[str] = []  # the keys of the GETs that came with the header

    def strip(req: WireRequest) -> None:
        if req.op == "GetObject" and "if-match" in req.headers:
            stripped.append(req.key)
            req.drop_header("If-Match")

    with WIRE.hook(strip):
        yield stripped


def test_the_if_match_hook_reaches_the_server(s3_store: str, if_match_ignored: list[str]) -> None:
    shard = location(f"{s3_store}/image/c/1/0/0/0")
    got = shard.store.get(shard.key, 0, 8, if_version='"not-its-etag"')  # a 412 with the header
    assert bytes(got.data) == bytes(shard.store.get(shard.key, 0, 8).data)


def test_an_object_replaced_while_reading_is_detected_where_if_match_is_ignored(
    s3_store: str, if_match_ignored: list[str]
) -> None:
    loader = StoreLoader(s3_store, batch_size=8, seed=3, num_threads=2)
    list(loader)  # every shard index read, with its object's ETag
    one, two = f"{s3_store}/image/c/1/0/0/0", f"{s3_store}/image/c/2/0/0/0"
    location(one).write_bytes(location(two).read_bytes())  # same size, sound chunks of another
    loader.set_epoch(1)
    if_match_ignored.clear()
    with pytest.raises(ChunkReadError, match=r"image/c/1/0/0/0.*replaced while the store"):
        list(loader)
    loader.close()
    # the loader's own reads sent If-Match and the server ignored it: the 200 answer with the
    # new object's ETag was caught, not a 412
    assert any(key.endswith("image/c/1/0/0/0") for key in if_match_ignored), if_match_ignored
