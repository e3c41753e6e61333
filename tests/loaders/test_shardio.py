"""The raw shard reader against zarr-python, on real stores written by pipeline.writer."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec

from loaders.errors import ChunkReadError, CorruptChunkError, UnsupportedArrayError
from loaders.store.rawio import MapCache
from loaders.store.rows import copy_rows
from loaders.store.shardio import IO_MODES, MISSING, ShardedArrayReader, parse_array_meta
from tests.contracts.loader_contract import make_index_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("sio") / "s", 50, holes=(0, 1, 2, 3, 7))


@pytest.fixture(scope="module")
def vstore(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("sio") / "v", 30, variants=3)


@pytest.fixture(params=IO_MODES)
def io(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("name", ["image", "label", "extent"])
def test_fast_path_matches_zarr(store: Path, vstore: Path, name: str, io: str) -> None:
    for root in (store, vstore):
        reader = ShardedArrayReader(root / name, io=io)
        assert reader.fast, reader.meta.reason
        np.testing.assert_array_equal(reader.read_all(), zarr.open_array(root / name)[:])


def test_chunk_into_reused_buffer_and_edge_padding(store: Path, io: str) -> None:
    reader = ShardedArrayReader(store / "image", io=io)
    buf = np.empty(reader.meta.chunk_shape, np.uint8)
    out = reader.read_chunk((12, 0, 0, 0), buf)  # samples 48, 49 + two padding rows
    assert out is buf
    assert out[:2, 0, 0, 0].tolist() == [48, 49]
    assert (out[2:] == 0).all()
    assert reader.read_chunk((5, 0, 0, 0), buf)[:, 3, 3, 0].tolist() == [20, 21, 22, 23]


def test_missing_chunk_reads_fill_value(tmp_path: Path, store: Path, io: str) -> None:
    # a generic array: zarr does not write a chunk of fill values, which reads as the fill
    z = zarr.create_array(
        tmp_path / "z",
        shape=(32,),
        chunks=(4,),
        shards=(16,),
        dtype="int64",
        compressors=[Crc32cCodec()],
        filters=None,
        fill_value=-1,
    )
    z[:] = np.r_[[-1] * 4, np.arange(28)]
    labels = ShardedArrayReader(tmp_path / "z", io=io)
    assert labels.fast, labels.meta.reason
    assert labels.read_chunk((0,)).tolist() == [-1, -1, -1, -1]
    assert labels._index.locate((0,), labels.shard_file((0,))) == (MISSING, MISSING)
    # a nostall store's writer writes every chunk, holes (samples 0-3 here) too
    written = ShardedArrayReader(store / "label", io=io, complete=True)
    assert written._index.locate((0,), written.shard_file((0,))) == (0, 36)


def test_variant_chunks(vstore: Path, io: str) -> None:
    reader = ShardedArrayReader(vstore / "image", io=io)
    chunk = reader.read_chunk((2, 1, 0, 0, 0))
    assert chunk.shape == (4, 1, 16, 16, 3)
    assert chunk[:, 0, 0, 0, 0].tolist() == [8, 9, 10, 11]
    assert (chunk[..., 2] == 1).all()


def test_flipped_byte_raises_naming_shard_and_chunk(tmp_path: Path, io: str) -> None:
    root = make_index_store(tmp_path / "s", 32)
    shard = root / "image" / "c" / "1" / "0" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[768 * 5 + 10] ^= 0x01  # second inner chunk of shard 1 (samples 20-23)
    shard.write_bytes(bytes(data))
    reader = ShardedArrayReader(root / "image", io=io)
    assert reader.read_chunk((4, 0, 0, 0))[0, 0, 0, 0] == 16  # other chunks still fine
    with pytest.raises(CorruptChunkError, match=r"image/c/1/0/0/0, chunk \(5, 0, 0, 0\)"):
        reader.read_chunk((5, 0, 0, 0))


def test_corrupt_index_and_truncated_shard(tmp_path: Path, io: str) -> None:
    root = make_index_store(tmp_path / "s", 32)
    shard = root / "label" / "c" / "0"
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptChunkError, match="shard index crc32c"):
        ShardedArrayReader(root / "label", io=io).read_chunk((0,))
    os.truncate(root / "image" / "c" / "1" / "0" / "0" / "0", 20)
    with pytest.raises(CorruptChunkError, match="shorter than its index"):
        ShardedArrayReader(root / "image", io=io).read_chunk((4, 0, 0, 0))


def test_io_error_is_wrapped_naming_shard(tmp_path: Path, io: str) -> None:
    root = make_index_store(tmp_path / "s", 32)
    shard = root / "image" / "c" / "0" / "0" / "0" / "0"
    shard.unlink()
    shard.mkdir()  # reading a directory fails with EISDIR
    with pytest.raises(ChunkReadError, match="image/c/0/0/0/0"):
        ShardedArrayReader(root / "image", io=io).read_chunk((0, 0, 0, 0))


def test_compressed_array_falls_back_to_zarr(tmp_path: Path) -> None:
    z = zarr.create_array(
        tmp_path / "z", shape=(10, 3), chunks=(4, 3), shards=(8, 3), dtype="int32", fill_value=-5
    )
    z[:7] = np.arange(21).reshape(7, 3)
    reader = ShardedArrayReader(tmp_path / "z")
    assert not reader.fast and "zstd" in reader.meta.reason
    np.testing.assert_array_equal(reader.read_all(), z[:])
    assert reader.read_chunk((2, 0)).tolist() == [[-5] * 3] * 4


def test_bad_metadata_and_buffer() -> None:
    with pytest.raises(UnsupportedArrayError, match="not a Zarr v3 array"):
        parse_array_meta({"zarr_format": 2})
    with pytest.raises(UnsupportedArrayError, match="data type"):
        parse_array_meta(
            {
                "zarr_format": 3,
                "node_type": "array",
                "data_type": "string",
                "chunk_grid": {"name": "regular"},
            }
        )


def test_wrong_out_buffer_is_refused(store: Path) -> None:
    reader = ShardedArrayReader(store / "label")
    with pytest.raises(ValueError, match="C-contiguous int64"):
        reader.read_chunk((1,), np.empty(4, np.int32))
    with pytest.raises(IndexError, match="outside the chunk grid"):
        reader.read_chunk((13,))


def test_scatter_rows_into_separate_buffers(store: Path, io: str) -> None:
    reader = ShardedArrayReader(store / "image", io=io)
    rows = [np.empty((16, 16, 3), np.uint8) for _ in range(4)]
    reader.read_chunk_into((6, 0, 0, 0), rows[::-1])  # chunk rows land in reverse order
    assert [int(r[0, 0, 0]) for r in rows] == [27, 26, 25, 24]
    with pytest.raises(ValueError, match="parts hold"):
        reader.read_chunk_into((6, 0, 0, 0), rows[:3])


def test_map_cache_keeps_its_budget(store: Path) -> None:
    maps = MapCache(budget=1)
    reader = ShardedArrayReader(store / "image", io="mmap", maps=maps)
    for chunk in range(0, 13, 4):  # one chunk of each of the four shards
        assert reader.read_chunk((chunk, 0, 0, 0))[0, 0, 0, 0] == (0 if chunk == 0 else chunk * 4)
    assert maps.mapped_bytes == (store / "image" / "c" / "3" / "0" / "0" / "0").stat().st_size
    with pytest.raises(ValueError, match="io must be one of"):
        ShardedArrayReader(store / "image", io="bogus")


def test_verify_first_checks_a_chunk_once_per_file_version(tmp_path: Path) -> None:
    root = make_index_store(tmp_path / "s", 16)
    reader = ShardedArrayReader(root / "image", io="mmap", verify="first")
    assert reader.read_chunk((1, 0, 0, 0))[0, 0, 0, 0] == 4
    shard = root / "image" / "c" / "0" / "0" / "0" / "0"
    st = shard.stat()
    with open(shard, "r+b") as f:  # in place: the mapping sees the change
        f.seek(768 * 4 + 4)  # chunk 0 (4 samples of 768 bytes, its crc32c), then chunk 1
        f.write(bytes([99]))
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))  # same inode, size and mtime
    # verified before and the file looks unchanged: not checked again (the flipped byte shows)
    assert reader.read_chunk((1, 0, 0, 0))[0, 0, 0, 0] == 99
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # the file changed: check again
    with pytest.raises(CorruptChunkError, match="checksum mismatch"):
        reader.read_chunk((1, 0, 0, 0))
    with pytest.raises(CorruptChunkError):
        ShardedArrayReader(root / "image", io="mmap", verify="always").read_chunk((1, 0, 0, 0))
    with pytest.raises(ValueError, match="verify must be one of"):
        ShardedArrayReader(root / "image", verify="never")


@pytest.mark.parametrize("io", IO_MODES)
def test_verify_first_checks_a_replaced_shard_file_again(tmp_path: Path, io: str) -> None:
    root = make_index_store(tmp_path / "s", 16)
    reader = ShardedArrayReader(root / "image", io=io, verify="first")
    assert reader.read_chunk((1, 0, 0, 0))[0, 0, 0, 0] == 4  # verified (and mapped, for mmap)
    shard = root / "image" / "c" / "0" / "0" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[768 * 4 + 4] ^= 0xFF  # first pixel of chunk 1
    new = shard.with_name("replacement")
    new.write_bytes(bytes(data))
    os.replace(new, shard)  # a new inode: the old mapping still shows the old bytes
    with pytest.raises(CorruptChunkError, match="checksum mismatch"):
        reader.read_chunk((1, 0, 0, 0))


@pytest.mark.parametrize("fast", [True, False])
def test_read_chunk_rows_routes_rows_to_batches(tmp_path: Path, store: Path, fast: bool) -> None:
    chunk, expect = (6, 0, 0, 0), [24, 25, 26, 27]
    if fast:
        reader = ShardedArrayReader(store / "image", io="mmap")
    else:  # a compressed copy: read through zarr-python, same routing
        images = zarr.open_array(store / "image")[:]
        z = zarr.create_array(
            tmp_path / "z",
            shape=images.shape,
            chunks=(4, 16, 16, 3),
            shards=(16, 16, 16, 3),
            dtype="uint8",
        )
        z[:] = images
        reader = ShardedArrayReader(tmp_path / "z")
        assert not reader.fast
    a, b = np.zeros((3, 16, 16, 3), np.uint8), np.zeros((2, 16, 16, 3), np.uint8)
    reader.read_chunk_rows(
        chunk, [(a, np.array([2, 0]), np.array([0, 3])), (b, np.array([1]), np.array([2]))]
    )
    assert a[:, 0, 0, 0].tolist() == [expect[3], 0, expect[0]]
    assert b[:, 0, 0, 0].tolist() == [0, expect[2]]
    # a run of destination rows (what a batch-sorted plan gives) is one gather
    c = np.zeros((4, 16, 16, 3), np.uint8)
    reader.read_chunk_rows(chunk, [(c, range(1, 4), np.array([0, 2, 3]))])
    assert c[:, 0, 0, 0].tolist() == [0, expect[0], expect[2], expect[3]]


def test_copy_rows_refuses_out_of_range_routes() -> None:
    src = np.arange(12, dtype=np.uint8).reshape(3, 4)
    dest = np.zeros((2, 4), np.uint8)
    copy_rows(src, [(dest, np.array([1]), np.array([2]))])
    assert dest[1].tolist() == [8, 9, 10, 11]
    copy_rows(src, [(dest, range(0, 2), np.array([1, 0]))])
    assert dest.tolist() == [[4, 5, 6, 7], [0, 1, 2, 3]]
    for bad in (
        [(dest, np.array([2]), np.array([0]))],
        [
            (dest, np.array([0]), np.array([3])),
        ],
        [(dest, range(1, 3), np.array([0, 1]))],
        [(dest, range(0, 2), np.array([0]))],
        [(dest, range(0, 1), np.array([-1]))],
        [(np.zeros((2, 3), np.uint8), np.array([0]), np.array([0]))],
    ):
        with pytest.raises(ValueError, match="route"):
            copy_rows(src, bad)


def _mapped_files() -> str:
    return Path("/proc/self/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_kept_chunk_views_serve_reads_and_never_keep_a_dropped_mapping(tmp_path: Path) -> None:
    """A chunk read again from the same file version reuses its checked view; a view never
    keeps a shard file mapped after the map cache dropped it (RSS stays within the budget)."""
    store = make_index_store(tmp_path / "s", 50, holes=(0, 1, 2, 3, 7))  # mapped by no one else
    maps = MapCache(budget=1)  # one shard file mapped at a time
    reader = ShardedArrayReader(store / "image", io="mmap", maps=maps)
    dest = np.zeros((2, 16 * 16 * 3), np.uint8)
    first, second = store / "image" / "c" / "1" / "0" / "0" / "0", store / "image" / "c" / "2"
    for _ in range(2):  # the second read comes from the kept view
        reader.read_chunk_runs((4, 0, 0, 0), [(dest, np.array([3, 1]))])
        assert dest[:, 0].tolist() == [19, 17]
    assert str(first) in _mapped_files()
    reader.read_chunk_runs((8, 0, 0, 0), [(dest[:1], np.array([2]))])  # drops shard 1's map
    reader.read_chunk_runs((8, 0, 0, 0), [(dest[1:], np.array([0]))])
    assert dest[:, 0].tolist() == [34, 32]
    gc.collect()
    mapped = _mapped_files()
    assert str(first) not in mapped and str(second) in mapped
    reader.close()
    gc.collect()
    assert str(second) not in _mapped_files()


def test_reads_from_kept_views_keep_their_file_most_recently_used(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 50)
    shard = store / "image" / "c"
    size = (shard / "0" / "0" / "0" / "0").stat().st_size
    maps = MapCache(budget=2 * size)  # two shard files mapped at a time
    reader = ShardedArrayReader(store / "image", io="mmap", maps=maps)
    dest = np.zeros((1, 16 * 16 * 3), np.uint8)
    for chunk in (0, 4, 0, 0):  # shard 0, shard 1, then shard 0 twice (from its kept view)
        reader.read_chunk_runs((chunk, 0, 0, 0), [(dest, np.array([1]))])
        assert dest[0, 0] == chunk * 4 + 1
    reader.read_chunk_runs((8, 0, 0, 0), [(dest, np.array([0]))])  # shard 2: one must go
    assert maps.paths == tuple(str(shard / n / "0" / "0" / "0") for n in "02")


def test_rows_no_one_asked_for_are_still_checked_and_scratch_is_reused(tmp_path: Path) -> None:
    """A subset's or weighted draw's unserved rows land in one reused scratch buffer per thread:
    they are still checksummed (a flipped byte in an unserved row fails), and reads after
    reads, with more or fewer unserved rows, serve exact values."""
    root = make_index_store(tmp_path / "s", 32)  # chunks of 4 samples, sample i's pixels = i
    images = zarr.open_array(root / "image")[:]
    reader = ShardedArrayReader(root / "image", io="pread", verify="always")
    for chunk, served in [(0, [1]), (1, [0, 1, 2]), (2, [3]), (3, [0, 3]), (0, [2])]:
        out = np.zeros((len(served), 16, 16, 3), np.uint8)
        reader.read_chunk_rows((chunk, 0, 0, 0), [(out, range(len(served)), np.array(served))])
        rows = [4 * chunk + r for r in served]
        assert [int(v) for v in out[:, 0, 0, 0]] == rows
        np.testing.assert_array_equal(out, images[rows])
    shard = root / "image" / "c" / "0" / "0" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[768 * 2 + 10] ^= 0x01  # chunk 0's row 2, which the read below does not serve
    shard.write_bytes(bytes(data))
    out = np.zeros((1, 16, 16, 3), np.uint8)
    with pytest.raises(CorruptChunkError, match=r"chunk \(0, 0, 0, 0\)"):
        reader.read_chunk_rows((0, 0, 0, 0), [(out, range(1), np.array([0]))])
