"""Per-field chunk codecs: spec, refusals, the bytes zarr-python writes and reads, verify."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
import zarr
from click.testing import CliRunner
from PIL import Image

from precompute.cli import cli
from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.format.codecs import CodecSpec, parse_codec_flag
from precompute.format.codecs.jpeg import JpegCodec, split_streams
from precompute.format.layout import StoreLayout, open_store_info
from precompute.format.shardcodec import encode_raw_shard
from precompute.format.summary import store_summary
from precompute.format.verify import verify_store
from precompute.pipeline.arraystore import write_fields_store
from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_image
from precompute.spec import BuildSpec
from tests.precompute.fielddata import make_segmentation

IMAGE_MASK = (FieldSpec("image", "image", {}), FieldSpec("mask", "mask", {"classes": 4}))


def photos(n: int, size: int) -> np.ndarray:
    """Photo-like pixels: the demo's generated pictures (shapes, gradients, noise)."""
    return np.stack([np.asarray(make_image(0, i, i % 4, (size, size))) for i in range(n)])


def masks(n: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    blocks = rng.integers(0, 4, (n, 4, 4)).astype(np.uint8)
    return np.repeat(np.repeat(blocks, size // 4, 1), size // 4, 2)


# -- spec ------------------------------------------------------------------------------------


def test_a_raw_spec_keeps_its_hash_and_a_codec_changes_it() -> None:
    raw = BuildSpec()
    assert BuildSpec(codecs={"image": "raw"}).digest() == raw.digest()
    assert "codecs" not in raw.to_dict()
    jpeg = BuildSpec(codecs={"image": "jpeg:90"})
    assert jpeg.digest() != raw.digest()
    assert jpeg.digest() != BuildSpec(codecs={"image": "jpeg:80"}).digest()
    assert BuildSpec.from_dict(json.loads(jpeg.canonical_json())) == jpeg
    assert jpeg.to_dict()["codecs"] == {
        "image": {"name": "jpeg", "quality": 90, "subsampling": "420", "restart_rows": 1}
    }


def test_the_codec_flag_parses_fields_and_arguments() -> None:
    assert parse_codec_flag("image=jpeg:85:444, mask=zstd:5,label=raw") == {
        "image": {"name": "jpeg", "quality": 85, "subsampling": "444", "restart_rows": 1},
        "mask": {"name": "zstd", "level": 5},
        "label": None,
    }
    for bad, says in [
        ("image", "is not FIELD=CODEC"),
        ("image=jpeg,image=zstd", "named twice"),
        ("image=lz4", "unknown codec 'lz4'"),
        ("image=jpeg:101", "quality must be an integer in [1, 100]"),
        ("image=jpeg:90:411", "subsampling must be one of"),
        ("mask=zstd:3:4", "takes 1"),
    ]:
        with pytest.raises(SpecError, match=None) as err:
            parse_codec_flag(bad)
        assert says in str(err.value), (bad, str(err.value))


@pytest.mark.parametrize(
    ("fields", "codecs", "says"),
    [
        (IMAGE_MASK, {"mask": "jpeg"}, "field 'mask' of kind 'mask' cannot be stored as 'jpeg'"),
        ((), {"label": "jpeg"}, "field 'label' of kind 'label' cannot be stored as 'jpeg'"),
        ((), {"mask": "zstd"}, "the store has no field 'mask'"),
        (
            (FieldSpec("image", "array", {"shape": [8, 8, 3], "dtype": "uint16"}),),
            {"image": "jpeg"},
            "kind 'array' takes raw, zstd",
        ),
    ],
)
def test_a_codec_a_kind_cannot_take_is_refused_naming_both(fields, codecs, says) -> None:
    with pytest.raises(SpecError) as err:
        spec = BuildSpec(size=16, fields=fields, codecs=codecs)
        StoreLayout.from_spec(spec, 10)  # fields a source gives: checked by the layout
    assert says in str(err.value)


def test_a_field_whose_storage_the_build_learns_takes_a_spec_with_or_without_codecs() -> None:
    # a box field's max_boxes is learned from the source: the spec cannot size it yet
    fields = (FieldSpec("image", "image", {}), FieldSpec("boxes", "boxes", {}))
    assert BuildSpec(size=16, fields=fields).codecs == ()  # a COCO build's spec, before learning
    spec = BuildSpec(size=16, fields=fields, codecs={"image": "jpeg:90", "boxes": "zstd:3"})
    assert dict(spec.codecs)["boxes"] == CodecSpec("zstd", {"level": 3})
    with pytest.raises(SpecError, match="field 'boxes' of kind 'boxes' cannot be stored as 'jpeg'"):
        BuildSpec(size=16, fields=fields, codecs={"boxes": "jpeg"})  # the kind's rule: at once
    learned = (fields[0], fields[1].with_options(max_boxes=3, classes=2))
    layout = StoreLayout.from_spec(BuildSpec(size=16, fields=learned, codecs=spec.codecs), 4)
    assert layout.arrays["boxes"].codec == CodecSpec("zstd", {"level": 3})


def test_a_missing_decoder_says_what_to_install(monkeypatch) -> None:
    codec = CodecSpec("jpeg")
    data = codec.codec.encode(photos(1, 16), codec.options, 0)
    monkeypatch.setitem(sys.modules, "simplejpeg", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'nostall\[jpeg\]'"):
        codec.codec.decode_into(data, np.empty((1, 16, 16, 3), np.uint8), codec.options, 0)


# -- bytes: what zarr-python writes, and reads --------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "row", "codec"),
    [
        ("uint8", (16, 16, 3), "zstd:3"),
        ("int64", (), "zstd:1"),
        ("float16", (8, 10), "zstd:9"),
        ("uint8", (16, 16, 3), "jpeg:90"),
        ("uint8", (16, 16, 1), "jpeg:75:444"),
    ],
)
def test_a_coded_shard_is_byte_for_byte_what_zarr_python_writes(dtype, row, codec) -> None:
    rng = np.random.default_rng(0)
    n, shard, chunk = 11, 8, 4  # a partial last chunk and shard
    values = (rng.integers(0, 4, (n, *row)) * 30).astype(dtype)
    values[2] = 0  # a sample of fill values
    spec = CodecSpec.from_dict(codec)
    serializer, compressors = spec.codec.zarr(spec.options)
    store = zarr.storage.MemoryStore()
    arr = zarr.create_array(
        store, shape=values.shape, shards=(shard, *row), chunks=(chunk, *row), dtype=dtype,
        serializer=serializer, compressors=[*compressors, zarr.codecs.Crc32cCodec()],
        filters=None, fill_value=0, config={"write_empty_chunks": True},
    )  # fmt: skip
    arr[:] = values
    for k in range(math.ceil(n / shard)):
        parts, digest = encode_raw_shard(
            values[k * shard : (k + 1) * shard], shape=values.shape, shard_shape=(shard, *row),
            chunk_shape=(chunk, *row), dtype=dtype, fill=0, shard=k, codec=spec,
        )  # fmt: skip
        ours = b"".join(bytes(p) for p in parts)
        key = "/".join(["c", str(k), *["0"] * len(row)])
        assert ours == store._store_dict[key].to_bytes()
        assert digest["size"] == len(ours)
    back = zarr.open_array(store)[:]
    if spec.lossy:
        assert np.abs(back.astype(int) - values).mean() < 30 and (back[2] == 0).all()  # noise
    else:
        assert np.array_equal(back, values)


def test_a_jpeg_chunk_is_read_as_docs_format_says(tmp_path: Path) -> None:
    """Another reader: the shard index, then the chunk's header, lengths and baseline JPEGs."""
    images = photos(6, 32)
    images[4] = 0  # a black frame: no stream, exactly black
    spec = BuildSpec(size=32, shard_samples=4, chunk_samples=2, codecs={"image": "jpeg:90"})
    write_store_from_arrays(tmp_path / "s", images, np.arange(6), spec)
    raw = (tmp_path / "s" / "image" / "c" / "1" / "0" / "0" / "0").read_bytes()
    index = np.frombuffer(raw[-(2 * 16 + 4) : -4], "<u8").reshape(2, 2)
    offset, nbytes = (int(v) for v in index[0])  # samples 4, 5
    chunk = raw[offset : offset + nbytes - 4]
    count = int.from_bytes(chunk[:4], "little")
    lengths = np.frombuffer(chunk[4 : 4 + 4 * count], "<u4")
    assert count == 2 and lengths[0] == 0
    stream = chunk[4 + 4 * count :]
    assert (
        stream[:2] == b"\xff\xd8" and b"\xff\xc0" in stream and b"\xff\xdd" in stream
    )  # SOF0, DRI
    decoded = np.asarray(Image.open(__import__("io").BytesIO(stream)))
    assert np.array_equal(decoded, zarr.open_array(tmp_path / "s" / "image")[5])
    assert np.abs(decoded.astype(int) - images[5]).mean() < 8  # lossy, on noisy pictures
    assert [len(s) for s in split_streams(chunk, 2)] == [0, len(stream)]


def test_the_zarr_codec_entry_point_names_the_codec_class() -> None:
    doc = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    points = doc["project"]["entry-points"]["zarr.codecs"]
    assert points == {"nostall.jpeg": "precompute.format.codecs.jpeg:JpegCodec"}
    assert zarr.registry.get_codec_class("nostall.jpeg") is JpegCodec
    assert JpegCodec(quality=80).to_dict()["name"] == "nostall.jpeg"


# -- build, verify, inspect ---------------------------------------------------------------------


def test_the_cli_builds_coded_fields_that_verify_and_zarr_read(tmp_path: Path) -> None:
    src = make_segmentation(tmp_path / "seg", n=12)
    runner = CliRunner()
    outs = {}
    for name, flag in [("raw", []), ("coded", ["--codec", "image=jpeg:90,mask=zstd:3"])]:
        out = tmp_path / name
        args = ["build", str(src), "--out", str(out), "--size", "32", "--mask-classes", "4"]
        args += ["--runner", "sequential", "--quiet", "--chunk-samples", "4", *flag]
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        outs[name] = out
    assert verify_store(outs["coded"]) == []
    raw_mask = zarr.open_array(outs["raw"] / "mask")[:]
    assert np.array_equal(zarr.open_array(outs["coded"] / "mask")[:], raw_mask)
    raw_img = zarr.open_array(outs["raw"] / "image")[:].astype(int)
    assert np.abs(zarr.open_array(outs["coded"] / "image")[:] - raw_img).mean() < 8
    summary = store_summary(outs["coded"])
    assert "storage    image: jpeg:90:420, " in summary and "x smaller than raw" in summary
    assert "storage    mask: zstd:3, " in summary
    info = open_store_info(outs["coded"])
    assert info.spec_hash != open_store_info(outs["raw"]).spec_hash
    refused = runner.invoke(
        cli,
        ["build", str(src), "--out", str(tmp_path / "x"), "--size", "32", "--mask-classes", "4",
         "--runner", "sequential", "--quiet", "--codec", "mask=jpeg"],
    )  # fmt: skip
    assert refused.exit_code != 0
    assert "field 'mask' of kind 'mask' cannot be stored as 'jpeg'" in refused.output
    assert not (tmp_path / "x" / "zarr.json").exists()


def _flip_in_first_chunk(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 4] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("codec", ["jpeg:90", "zstd:3"])
def test_a_damaged_coded_chunk_is_a_checksum_error_in_verify(tmp_path: Path, codec) -> None:
    spec = BuildSpec(size=32, shard_samples=8, chunk_samples=4, codecs={"image": codec})
    write_store_from_arrays(tmp_path / "s", photos(8, 32), np.arange(8), spec)
    assert verify_store(tmp_path / "s") == []
    _flip_in_first_chunk(tmp_path / "s" / "image" / "c" / "0" / "0" / "0" / "0")
    problems = verify_store(tmp_path / "s")
    assert problems and "checksum" in problems[0].lower(), problems


def test_holes_of_a_jpeg_field_hold_exactly_the_fill(tmp_path: Path) -> None:
    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2, fields=IMAGE_MASK,
                     codecs={"image": "jpeg:50", "mask": "zstd"})  # fmt: skip
    images, ids = photos(6, 16), masks(6, 16)
    valid = np.array([1, 0, 1, 1, 0, 1], np.uint8)
    images[valid == 0], ids[valid == 0] = 0, 255
    keys = [f"k{i}" if v else "" for i, v in enumerate(valid)]
    write_fields_store(
        tmp_path / "s", spec, {"image": images, "mask": ids, "valid": valid, "key": keys}
    )
    assert verify_store(tmp_path / "s") == []
    assert (zarr.open_array(tmp_path / "s" / "image")[:][valid == 0] == 0).all()
