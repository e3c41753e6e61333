import json

import numpy as np
import pytest
import zarr

from precompute.errors import StoreError, StoreIncompleteError, StoreMismatchError
from precompute.format.layout import StoreLayout, open_store_info, shard_marker_path
from precompute.pipeline.writer import (
    create_or_resume,
    finalize,
    write_shard,
    write_store_from_arrays,
)
from precompute.spec import BuildSpec

SPEC = BuildSpec(size=8, shard_samples=16, chunk_samples=4)


def _images(n, k=1):
    base = np.arange(n, dtype=np.uint8)[:, None, None, None]
    img = np.broadcast_to(base, (n, 8, 8, 3)).copy()
    if k > 1:
        img = np.stack([img + v for v in range(k)], axis=1)
    return img


def test_round_trip_through_zarr(tmp_path):
    root = tmp_path / "s"
    write_store_from_arrays(root, _images(50), np.arange(50) % 5, SPEC)
    info = open_store_info(root)
    assert info.layout.num_shards == 4
    assert info.num_valid == 50
    g = zarr.open_group(str(root), mode="r")
    assert np.array_equal(g["image"][:], _images(50))
    assert g["label"][:].tolist() == (np.arange(50) % 5).tolist()
    codecs = g["image"].metadata.to_dict()["codecs"][0]["configuration"]
    assert [c["name"] for c in codecs["codecs"]] == ["bytes", "crc32c"]


def test_variants_layout(tmp_path):
    spec = BuildSpec(size=8, shard_samples=16, chunk_samples=4, variants=3)
    write_store_from_arrays(tmp_path / "v", _images(20, 3), np.zeros(20), spec)
    g = zarr.open_group(str(tmp_path / "v"), mode="r")
    assert g["image"].shape == (20, 3, 8, 8, 3)
    assert g["image"][5, 2, 0, 0, 0] == 7
    assert g["extent"].shape == (20, 3, 4)


def test_incomplete_store_is_refused_then_resumed(tmp_path):
    root = tmp_path / "p"
    layout = StoreLayout.from_spec(SPEC, 40)
    assert create_or_resume(root, SPEC, layout, "fp") == set()
    write_shard(
        root,
        layout,
        1,
        image=_images(16),
        label=np.arange(16),
        extent=np.zeros((16, 4)),
        key=[str(i) for i in range(16)],
    )
    with pytest.raises(StoreIncompleteError, match="incomplete"):
        open_store_info(root)
    with pytest.raises(StoreError, match="shard 0"):
        finalize(root, {})
    assert create_or_resume(root, SPEC, layout, "fp") == {1}
    with pytest.raises(StoreMismatchError, match=r"source: .* \(fingerprint fp \(store\) vs other"):
        create_or_resume(root, SPEC, layout, "other")


def test_skipped_inputs_reach_the_report(tmp_path):
    root = tmp_path / "h"
    layout = StoreLayout.from_spec(SPEC, 10)
    create_or_resume(root, SPEC, layout, "fp")
    label = np.arange(10)
    label[3] = -1
    write_shard(
        root,
        layout,
        0,
        image=_images(10),
        label=label,
        extent=np.zeros((10, 4)),
        key=[str(i) for i in range(10)],
        skipped=[{"key": "3", "reason": "truncated"}],
    )
    attrs = finalize(root, {"builder": "test"})
    assert attrs["complete"] is True
    assert attrs["num_valid"] == 9
    assert attrs["report"]["skipped"] == [{"key": "3", "reason": "truncated"}]
    assert json.loads(shard_marker_path(root, 0).read_text())["num_valid"] == 9


def test_wrong_shape_and_non_store_folder(tmp_path):
    layout = StoreLayout.from_spec(SPEC, 10)
    create_or_resume(tmp_path / "w", SPEC, layout, "fp")
    with pytest.raises(StoreError, match="image has shape"):
        write_shard(
            tmp_path / "w",
            layout,
            0,
            image=_images(9),
            label=np.arange(10),
            extent=np.zeros((10, 4)),
            key=[""] * 10,
        )
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "file.txt").write_text("x")
    with pytest.raises(StoreError, match="not empty"):
        create_or_resume(junk, SPEC, layout, "fp")


def test_other_version_refused(tmp_path):
    root = tmp_path / "o"
    write_store_from_arrays(root, _images(4), np.arange(4), SPEC)
    meta = json.loads((root / "zarr.json").read_text())
    meta["attributes"]["nostall"]["version"] = 99
    (root / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="version 99"):
        open_store_info(root)
