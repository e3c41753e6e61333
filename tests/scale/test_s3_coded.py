"""Coded chunks (jpeg, zstd) from object storage: ranged GETs of stored bytes, the read cache.

A store with a ``jpeg`` image, a ``zstd`` mask and a ``zstd`` label, uploaded to the test S3
server (moto on 127.0.0.1), streamed by ``StoreLoader``: its batches hold what zarr-python
decodes from the local copy, each chunk is one ranged GET of exactly its stored bytes, the read
cache keeps those stored bytes (not decoded pixels) and serves the second epoch, and a damaged
chunk, over the wire or in the cache, is never served as pixels.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zarr

from loaders import StoreLoader
from loaders.errors import CorruptChunkError
from loaders.store.readcache import ReadCache
from precompute.fields import FieldSpec
from precompute.format.shardcodec import chunk_sound
from precompute.pipeline.arraystore import write_fields_store
from precompute.sample import make_image
from precompute.spec import BuildSpec
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from tests.contracts.loader_contract import Epochs, assert_same_epochs, serve_epochs
from tests.s3wire import WIRE, WireRequest

SIZE, N, CHUNK = 32, 24, 4  # 3 shards of 8, chunks of 4


@pytest.fixture(scope="module")
def coded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """jpeg image, zstd mask, zstd label; one hole (sample 5)."""
    root = tmp_path_factory.mktemp("s3coded") / "store"
    fields = (
        FieldSpec("image", "image", {}),
        FieldSpec("mask", "mask", {"classes": 4}),
        FieldSpec("label", "label", {"classes": 4}),
    )
    spec = BuildSpec(size=SIZE, shard_samples=8, chunk_samples=CHUNK, fields=fields,
                     codecs={"image": "jpeg:90", "mask": "zstd:3", "label": "zstd:3"})  # fmt: skip
    images = np.stack([np.asarray(make_image(4, i, i % 4, (SIZE, SIZE))) for i in range(N)])
    grid = np.arange(N * 16).reshape(N, 4, 4) % 4
    masks = np.repeat(np.repeat(grid, 8, 1), 8, 2).astype(np.uint8)
    valid = np.ones(N, np.uint8)
    valid[5] = 0
    images[5], masks[5] = 0, 255
    labels = np.where(valid == 1, np.arange(N) % 4, -1)
    keys = [f"k{i}" if v else "" for i, v in enumerate(valid)]
    arrays = {"image": images, "mask": masks, "label": labels, "valid": valid, "key": keys}
    write_fields_store(root, spec, arrays)
    return root


@pytest.fixture
def s3_coded(bucket: str, coded: Path) -> str:
    url = f"{bucket}/stores/coded.zarr"
    put_folder(coded, url)
    return url


def _epochs(store: str | Path, epochs: int = 1, **kw: object) -> Epochs:
    loader = StoreLoader(store, batch_size=5, seed=2, num_threads=3, drop_last=False, **kw)
    return serve_epochs(loader, epochs)


def _stored_chunk_bytes(root: Path, name: str) -> list[int]:
    """Each inner chunk's stored bytes + crc32c, from the shard indexes of the local copy."""
    sizes = []
    for shard in sorted(p for p in (root / name / "c").rglob("*") if p.is_file()):
        data = shard.read_bytes()
        count = 8 // CHUNK  # chunks per shard
        index = np.frombuffer(data[-(16 * count + 4) : -4], "<u8").reshape(count, 2)
        sizes += [int(n) for _, n in index]
    return sizes


@pytest.mark.parametrize("window", [8, 2])  # 2: three windows, the next one fetched ahead
def test_batches_from_s3_hold_what_zarr_python_decodes(
    s3_coded: str, coded: Path, window: int
) -> None:
    want = {n: np.asarray(zarr.open_array(coded / n)[:]) for n in ("image", "mask", "label")}
    (epoch,) = _epochs(s3_coded, buffer_chunks=window)
    served = np.concatenate([b["index"] for b in epoch])
    assert sorted(served.tolist()) == [i for i in range(N) if i != 5]
    for batch in epoch:
        for name, values in want.items():
            np.testing.assert_array_equal(batch[name], values[batch["index"]], err_msg=name)
    assert_same_epochs(
        _epochs(s3_coded, 2, buffer_chunks=window), _epochs(coded, 2, buffer_chunks=window)
    )


@contextmanager
def _chunk_gets() -> Iterator[list[tuple[str, int]]]:
    """Within: ``(key, bytes)`` of each ranged GET of a chunk (``bytes=a-b``; not a tail)."""
    seen: list[tuple[str, int]] = []

    def record(req: WireRequest) -> None:
        first, _, last = req.headers.get("range", "").removeprefix("bytes=").partition("-")
        if req.op == "GetObject" and first and last:
            seen.append((req.key, int(last) - int(first) + 1))

    with WIRE.hook(record):
        yield seen


def test_coded_chunks_are_ranged_gets_of_their_stored_bytes_then_read_from_the_cache(
    s3_coded: str, coded: Path, tmp_path: Path
) -> None:
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    with _chunk_gets() as gets:
        first = _epochs(s3_coded, read_cache=cache)
    for name in ("image", "mask"):  # one GET per chunk, of exactly its stored bytes + crc32c
        got = sorted(n for key, n in gets if f"/{name}/c/" in key)
        assert got == sorted(_stored_chunk_bytes(coded, name)), name
    stored = sum(_stored_chunk_bytes(coded, "image") + _stored_chunk_bytes(coded, "mask"))
    chunks = N // CHUNK
    raw = chunks * CHUNK * (SIZE * SIZE * 3 + SIZE * SIZE)
    assert cache.cached_bytes == stored < raw / 2  # the chunks as stored, not decoded
    entries = [p.read_bytes() for p in (tmp_path / "cache").glob("??/*")]
    assert len(entries) == 2 * chunks and all(chunk_sound(e) for e in entries)
    again = ReadCache(tmp_path / "cache", 1 << 30)  # a later run adopts the folder
    with _chunk_gets() as gets:
        second = _epochs(s3_coded, read_cache=again)
    assert gets == []  # every chunk from the cache (the shard indexes' tails are fetched)
    assert again.hits == 2 * chunks and again.misses == 0
    assert_same_epochs(second, first)


@pytest.mark.parametrize("window", [8, 1])  # 1: every chunk but the first fetched ahead
def test_a_damaged_coded_chunk_over_s3_is_a_checksum_error(s3_coded: str, window: int) -> None:
    shard = location(f"{s3_coded}/image/c/1/0/0/0")
    data = bytearray(shard.read_bytes())
    data[40] ^= 0x10  # inside shard 1's first chunk: its JPEG lengths or streams
    shard.write_bytes(bytes(data))
    with pytest.raises(
        CorruptChunkError,
        match=r"image: shard file s3://.*/image/c/1/0/0/0, chunk \(2, 0, 0, 0\): "
        r"crc32c checksum mismatch",
    ):
        _epochs(s3_coded, buffer_chunks=window)


def test_a_damaged_coded_chunk_never_enters_the_read_cache(s3_coded: str, tmp_path: Path) -> None:
    shard = location(f"{s3_coded}/mask/c/2/0/0")
    data = bytearray(shard.read_bytes())
    data[10] ^= 0x01  # inside shard 2's first zstd frame
    shard.write_bytes(bytes(data))
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    loader = StoreLoader(s3_coded, 4, seed=0, shuffle=False, read_cache=cache)
    with pytest.raises(CorruptChunkError, match=r"mask: .*crc32c checksum mismatch"):
        for _ in loader:
            pass
    loader.close()
    cached = [p.read_bytes() for p in (tmp_path / "cache").glob("??/*")]
    assert cached and all(chunk_sound(entry) for entry in cached)  # only sound chunks kept


def test_a_damaged_cache_entry_of_a_coded_chunk_is_fetched_again(
    s3_coded: str, coded: Path, tmp_path: Path
) -> None:
    cache = ReadCache(tmp_path / "cache", 1 << 30)
    _epochs(s3_coded, read_cache=cache)
    for entry in (tmp_path / "cache").glob("??/*"):
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0xFF
        entry.write_bytes(bytes(data))
    again = ReadCache(tmp_path / "cache", 1 << 30)
    with _chunk_gets() as gets:
        got = _epochs(s3_coded, read_cache=again)
    assert_same_epochs(got, _epochs(coded))  # right pixels, never the damaged entries'
    assert len(gets) == 2 * (N // CHUNK)  # every damaged entry fetched again
    assert all(chunk_sound(p.read_bytes()) for p in (tmp_path / "cache").glob("??/*"))


def test_the_next_windows_chunks_are_fetched_while_this_one_decodes(s3_coded: str) -> None:
    loader = StoreLoader(s3_coded, 5, seed=2, buffer_chunks=2, prefetch=0, num_threads=2)
    with _chunk_gets() as gets:
        it = iter(loader)
        next(it)  # the first window's two chunks read, the next window's fetch started
        deadline = time.monotonic() + 10
        while len([k for k, _ in gets if "/image/" in k]) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len([k for k, _ in gets if "/image/" in k]) == 4  # two windows, not one
        rest = sum(1 for _ in it)
    loader.close()
    assert rest == (N - 1) // 5 - 1  # the epoch served every other batch (drop_last)
    image = sorted(k for k, _ in gets if "/image/" in k)
    assert len(image) == N // CHUNK == len(set(image)) * 2  # one GET per chunk: 3 shards x 2


def test_a_fetch_cancelled_before_it_ran_is_fetched_by_the_read(s3_coded: str, coded: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from loaders.store.shardio import ShardedArrayReader

    remote = ShardedArrayReader(f"{s3_coded}/image", complete=True)
    local = ShardedArrayReader(coded / "image", complete=True)
    gate = threading.Event()
    pool = ThreadPoolExecutor(1)
    try:
        pool.submit(gate.wait)  # the pool's one thread busy: the fetch waits in its queue
        remote.fetch_ahead([(1, 0, 0, 0)], pool)
        remote._ahead[(1, 0, 0, 0)][0].cancel()  # as drop_ahead does, racing a read
        got = remote.read_chunk((1, 0, 0, 0))
    finally:
        gate.set()
        pool.shutdown()
    np.testing.assert_array_equal(got, local.read_chunk((1, 0, 0, 0)))
    assert remote._ahead == {}


def test_a_mixture_of_coded_stores_in_s3_fetches_each_stores_chunks_ahead(
    bucket: str, coded: Path
) -> None:
    urls = [f"{bucket}/mix/{name}.zarr" for name in ("a", "b")]
    for url in urls:
        put_folder(coded, url)
    kw = {"buffer_chunks": 2, "proportions": [0.5, 0.5]}
    with _chunk_gets() as gets:
        remote = _epochs(urls, 1, **kw)  # type: ignore[arg-type]
    local = _epochs([coded, coded], 1, **kw)  # type: ignore[arg-type]
    assert_same_epochs(remote, local)
    for url in urls:  # each store's chunks once each, from its own objects
        key = url.split("/", 3)[3]
        assert len([k for k, _ in gets if k.startswith(f"{key}/image/c/")]) == N // CHUNK
