"""The one table of a store's arrays: v1 unchanged, v2 one array per field plus valid/key."""

from __future__ import annotations

import pytest

from precompute.fields import FieldSpec
from precompute.format.layout import StoreLayout
from precompute.format.storecheck import expected_shard_size, sharded_names


def test_v1_arrays_are_the_v1_geometry() -> None:
    layout = StoreLayout(10, 8, 1, 4, 2)
    arrays = layout.arrays
    assert list(arrays) == ["image", "label", "extent", "key"]
    assert layout.version == 1
    assert (arrays["image"].shape, arrays["image"].shard, arrays["image"].chunk) == (
        (10, 8, 8, 3),
        (4, 8, 8, 3),
        (2, 8, 8, 3),
    )
    assert (arrays["label"].dtype, arrays["label"].fill) == ("int64", -1)
    assert arrays["key"].chunk == () and not arrays["key"].sharded
    assert sharded_names(layout) == ("image", "label", "extent")
    # 2 inner chunks of 2*8*8*3 bytes + crc each, then an index of 2 entries (16 B) + crc
    assert expected_shard_size(layout, "image", 0) == 2 * (384 + 4) + 2 * 16 + 4


def test_v1_variants_put_k_after_n_for_image_and_extent_only() -> None:
    arrays = StoreLayout(10, 8, 3, 4, 2).arrays
    assert arrays["image"].shape == (10, 3, 8, 8, 3) and arrays["image"].chunk == (2, 1, 8, 8, 3)
    assert arrays["extent"].shape == (10, 3, 4)
    assert arrays["label"].shape == (10,)


def test_v2_arrays_follow_the_fields() -> None:
    fields = (
        FieldSpec("image", "image", {"channels": 1}),
        FieldSpec("mask", "mask", {"classes": 300, "ignore_index": 300}),
        FieldSpec("points", "keypoints", {"points": 5}),
        FieldSpec("tags", "labels", {"classes": 7}),
    )
    layout = StoreLayout(9, 16, 2, 4, 2, fields)
    arrays = layout.arrays
    assert layout.version == 2
    assert list(arrays) == ["image", "mask", "points", "tags", "extent", "valid", "key"]
    assert arrays["image"].shape == (9, 2, 16, 16, 1)  # spatial (and keypoints): per variant
    assert arrays["mask"].dtype == "uint16" and arrays["mask"].fill == 300
    assert arrays["points"].shape == (9, 2, 5, 3) and arrays["points"].dtype == "float32"
    assert arrays["tags"].shape == (9, 7)  # not spatial: shared by the variants
    assert arrays["valid"].shape == (9,) and arrays["valid"].dtype == "uint8"
    assert arrays["extent"].shape == (9, 2, 4)


def test_v2_without_spatial_fields_has_no_extent() -> None:
    fields = (FieldSpec("x", "array", {"shape": [3, 2], "dtype": "float64"}),)
    arrays = StoreLayout(5, 4, 1, 4, 2, fields).arrays
    assert list(arrays) == ["x", "valid", "key"]
    assert arrays["x"].itemsize == 8
    with pytest.raises(KeyError, match=r"^'extent'$"):
        expected_shard_size(StoreLayout(5, 4, 1, 4, 2, fields), "extent", 0)
