"""Opening a v2 store: which arrays stream, which are read whole, and damage named by field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.errors import CorruptChunkError, StoreMetadataError, StoreOpenError
from loaders.store.open_store import open_store
from precompute.fields import FieldSpec
from precompute.spec import BuildSpec
from tests.loaders.v2stores import (
    index_mask,
    make_v2_index_store,
    write_v2_store,
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_v2_index_store(tmp_path / "s", 40, holes=(2, 9))


def test_frame_fields_stream_and_small_arrays_are_read_whole(store: Path) -> None:
    source = open_store(store)
    assert list(source.streams) == ["image", "mask"]
    assert sorted(source.small) == ["keypoints", "label"]
    assert source.valid.tolist() == [i not in (2, 9) for i in range(40)]
    np.testing.assert_array_equal(source.small["label"][[0, 2, 8]], [0, -1, 1])


def test_valid_comes_from_the_valid_array_not_the_label(tmp_path: Path) -> None:
    # a v2 store need not have a label: a mask-only store still skips its holes
    fields = (FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4}))
    n, idx = 12, np.arange(12)
    image = np.zeros((n, 16, 16, 3), np.uint8)
    image[..., 0] = idx[:, None, None]
    valid = np.ones(n, np.uint8)
    valid[[1, 7]] = 0
    spec = BuildSpec(size=16, chunk_samples=4, shard_samples=8)
    path = write_v2_store(
        tmp_path / "m", fields, {"image": image, "mask": index_mask(idx, 16)}, spec, valid=valid
    )
    got = [{k: v.numpy() for k, v in b.items()} for b in StoreLoader(path, 4, drop_last=False)]
    index = np.concatenate([b["index"] for b in got])
    assert sorted(index.tolist()) == [i for i in range(n) if i not in (1, 7)]
    for b in got:
        assert set(b) == {"image", "mask", "index", "is_pad"}
        np.testing.assert_array_equal(b["image"][:, 0, 0, 0], b["index"])
        np.testing.assert_array_equal(b["mask"], index_mask(b["index"], 16))


def test_a_valid_value_other_than_0_or_1_is_refused(tmp_path: Path) -> None:
    fields = (FieldSpec("label", "label"),)
    valid = np.array([1, 1, 3, 1], np.uint8)
    spec = BuildSpec(size=8, chunk_samples=2, shard_samples=2)
    path = write_v2_store(tmp_path / "v", fields, {"label": np.arange(4)}, spec, valid=valid)
    with pytest.raises(StoreOpenError, match=r"field 'valid' holds 3 at sample 2"):
        open_store(path)


def test_a_missing_field_array_is_named(store: Path) -> None:
    (store / "mask" / "zarr.json").unlink()
    with pytest.raises(StoreOpenError, match=r"field 'mask' is missing"):
        StoreLoader(store, 8)


def test_a_missing_mask_shard_file_is_named(store: Path) -> None:
    shard = store / "mask" / "c" / "1" / "0" / "0"
    shard.unlink()
    with pytest.raises(StoreOpenError, match=r"mask/c/1/0/0"):
        StoreLoader(store, 8)


def test_a_wrong_mask_dtype_is_named(store: Path) -> None:
    meta = store / "mask" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["data_type"] = "uint16"
    meta.write_text(json.dumps(doc))
    with pytest.raises(StoreMetadataError, match=r"mask/zarr.json.*data_type"):
        StoreLoader(store, 8)


def test_a_corrupt_mask_chunk_names_its_shard(store: Path) -> None:
    shard = store / "mask" / "c" / "0" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))
    loader = StoreLoader(store, 8, shuffle=False)
    with pytest.raises(CorruptChunkError, match=r"mask/c/0/0/0"):
        list(loader)


def test_a_corrupt_keypoints_chunk_fails_at_open(store: Path) -> None:
    shard = store / "keypoints" / "c" / "0" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[5] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptChunkError, match=r"keypoints/c/0/0/0"):
        open_store(store)
