"""Shard files written directly are byte for byte the files zarr-python writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.array_spec import ArrayConfig

from precompute.format.layout import StoreLayout
from precompute.format.shardcodec import (
    CRC_BYTES,
    MISSING,
    chunk_sound,
    decode_index,
    encode_index,
    index_nbytes,
    raw_writable,
    write_raw_shard,
)
from precompute.format.storecheck import file_digest, sharded_file_size
from precompute.pipeline.writer import create_or_resume, write_shard
from precompute.spec import BuildSpec

CASES = [  # shape, shard rows, chunk rows, dtype, fill
    ((75, 6, 5, 3), 32, 8, "uint8", 0),  # last shard partial, its last chunk partial
    ((64, 4), 32, 8, "int32", 0),
    ((70,), 32, 16, "int64", -1),
    ((50, 11, 2), 16, 4, "float32", float("nan")),  # keypoints' fill
    ((33, 160), 16, 8, "int16", 0),  # audio
    ((40, 9, 9, 20), 16, 8, "float16", 0.0),
    ((21,), 8, 4, "bool", False),
    ((48, 3, 3, 7), 16, 16, "uint16", 0),
]


def _values(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def _zarr_array(
    tmp_path: Path,
    shape: tuple[int, ...],
    shard: tuple[int, ...],
    chunk: tuple[int, ...],
    dtype: str,
    fill: float,
) -> zarr.Array:
    """The array zarr-python writes the reference shard files of (crc32c, raw bytes, C order)."""
    return zarr.create_array(
        str(tmp_path / "zarr"), shape=shape, shards=shard, chunks=chunk, dtype=dtype,
        fill_value=fill, compressors=[Crc32cCodec()], filters=None,
    ).with_config(ArrayConfig(order="C", write_empty_chunks=True))  # fmt: skip


@pytest.mark.parametrize(("shape", "shard_rows", "chunk_rows", "dtype", "fill"), CASES)
def test_every_shard_file_matches_zarr_byte_for_byte(
    tmp_path: Path,
    shape: tuple[int, ...],
    shard_rows: int,
    chunk_rows: int,
    dtype: str,
    fill: float,
) -> None:
    shard, chunk = (shard_rows, *shape[1:]), (chunk_rows, *shape[1:])
    assert raw_writable(shape, shard, chunk, dtype)
    z = _zarr_array(tmp_path, shape, shard, chunk, dtype, fill)
    values = _values(shape, dtype, seed=len(shape) + shard_rows)
    tail = "/".join(["0"] * (len(shape) - 1))
    for s in range(-(-shape[0] // shard_rows)):
        rows = values[s * shard_rows : (s + 1) * shard_rows]
        z[s * shard_rows : s * shard_rows + len(rows)] = rows
        ours = tmp_path / "raw" / "c" / str(s) / tail
        digest = write_raw_shard(
            ours, rows, shape=shape, shard_shape=shard, chunk_shape=chunk, dtype=dtype,
            fill=fill, shard=s,
        )  # fmt: skip
        theirs = (tmp_path / "zarr" / "c" / str(s) / tail).read_bytes()
        assert ours.read_bytes() == theirs
        assert digest == file_digest(ours)
        assert digest["size"] == sharded_file_size(shape, shard, chunk, np.dtype(dtype).itemsize,
                                                   (s,) + (0,) * (len(shape) - 1))  # fmt: skip
    assert not list((tmp_path / "raw").rglob("*.partial"))  # renamed into place
    # zarr-python reads the directly written files back as the values
    (tmp_path / "raw" / "zarr.json").write_bytes((tmp_path / "zarr" / "zarr.json").read_bytes())
    back = zarr.open_array(str(tmp_path / "raw"), mode="r")[:]
    assert back.dtype == values.dtype and np.array_equal(back, values, equal_nan=True)


def test_a_store_written_directly_matches_one_written_through_zarr(tmp_path: Path) -> None:
    """Through :func:`write_shard`: every array but ``key`` written directly, same bytes."""
    spec = BuildSpec(size=8, shard_samples=16, chunk_samples=4)
    layout = StoreLayout.from_spec(spec, 37)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (37, 8, 8, 3), dtype=np.uint8)
    label = rng.integers(0, 5, 37).astype(np.int64)
    extent = rng.integers(0, 100, (37, 4)).astype(np.int32)
    keys = [f"k/{i}.jpg" for i in range(37)]
    roots = (tmp_path / "direct", tmp_path / "zarr")
    for root in roots:
        create_or_resume(root, spec, layout, "f" * 64)
    for s in range(layout.num_shards):
        a, b = layout.shard_range(s)
        write_shard(roots[0], layout, s, image=image[a:b], label=label[a:b],
                    extent=extent[a:b], key=keys[a:b])  # fmt: skip
        for name, values in (("image", image), ("label", label), ("extent", extent)):
            zarr.open_array(str(roots[1] / name), mode="r+").with_config(
                ArrayConfig(order="C", write_empty_chunks=True)
            )[a:b] = values[a:b]
    for name in ("image", "label", "extent"):
        for f in sorted((roots[1] / name / "c").rglob("*")):
            if f.is_file():
                mine = roots[0] / f.relative_to(roots[1])
                assert mine.read_bytes() == f.read_bytes(), mine


def test_a_cast_across_kinds_keeps_exact_values_and_refuses_the_rest(tmp_path: Path) -> None:
    geometry = dict(shape=(4, 2), shard_shape=(4, 2), chunk_shape=(2, 2), dtype="int32", fill=0)
    write_raw_shard(tmp_path / "a", np.full((4, 2), 3.0), shard=0, **geometry)  # type: ignore[arg-type]
    back = np.frombuffer((tmp_path / "a").read_bytes()[:8], "<i4")
    assert back.tolist() == [3, 3]
    for bad in (np.full((4, 2), 2.5), np.full((4, 2), 2.0**40), np.full((4, 2), np.nan)):
        with pytest.raises(ValueError, match="float64 values that int32 cannot hold exactly"):
            write_raw_shard(tmp_path / "b", bad, shard=0, **geometry)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="int64 values that int32 cannot hold exactly"):
        write_raw_shard(tmp_path / "b", np.full((4, 2), 2**40), shard=0, **geometry)  # type: ignore[arg-type]
    write_raw_shard(tmp_path / "c", np.full((4, 2), 7, np.int64), shard=0, **geometry)  # type: ignore[arg-type]
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob("*.partial"))


def test_only_sample_axis_sharding_of_fixed_size_dtypes_is_written_directly() -> None:
    assert not raw_writable((10, 2, 4), (4, 2, 4), (2, 1, 4), "uint8")  # variants
    assert not raw_writable((10,), (4,), (), "string")
    assert not raw_writable((10,), (6,), (4,), "int64")  # chunks not dividing the shard


@pytest.mark.parametrize(("shape", "shard_rows", "chunk_rows", "dtype", "fill"), CASES[:4])
def test_the_codec_decodes_zarr_pythons_shard_files(
    tmp_path: Path,
    shape: tuple[int, ...],
    shard_rows: int,
    chunk_rows: int,
    dtype: str,
    fill: float,
) -> None:
    shard, chunk = (shard_rows, *shape[1:]), (chunk_rows, *shape[1:])
    z = _zarr_array(tmp_path, shape, shard, chunk, dtype, fill)
    values = _values(shape, dtype, seed=3)
    z[:] = values
    per_shard = (shard_rows // chunk_rows, *([1] * (len(shape) - 1)))
    tail = "/".join(["0"] * (len(shape) - 1))
    raw = (tmp_path / "zarr" / "c" / ("0/" + tail if tail else "0")).read_bytes()
    index = decode_index(raw[-index_nbytes(per_shard[0]) :], per_shard)
    item = np.dtype(dtype).itemsize * int(np.prod(chunk))
    for j in range(per_shard[0]):  # every chunk: its bytes, their crc32c, its values
        offset, nbytes = (int(v) for v in index.reshape(-1, 2)[j])
        if offset == MISSING:
            assert (j * chunk_rows) >= shape[0] and nbytes == MISSING
            continue
        assert nbytes == item + CRC_BYTES and chunk_sound(raw[offset : offset + nbytes])
        got = np.frombuffer(raw[offset : offset + item], dtype).reshape(chunk)
        want = values[j * chunk_rows : (j + 1) * chunk_rows]
        np.testing.assert_array_equal(got[: len(want)], want)
    assert encode_index(index) == [raw[-index_nbytes(per_shard[0]) : -CRC_BYTES], raw[-CRC_BYTES:]]
    bad = bytearray(raw[-index_nbytes(per_shard[0]) :])
    bad[3] ^= 1
    with pytest.raises(ValueError, match="shard index crc32c checksum mismatch"):
        decode_index(bytes(bad), per_shard)
    assert not chunk_sound(bytes(bad))
