"""DaliStoreLoader over v2 stores: serves image + label, refuses other fields by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loaders.errors import StoreOpenError
from precompute.fields import FieldSpec
from precompute.spec import BuildSpec
from tests.contracts.index_store import cat, collect, decode_index
from tests.loaders.v2stores import make_v2_index_store, write_v2_store

pytestmark = pytest.mark.dali


def _loader(path: Path, **kw: Any) -> Any:
    from loaders.dali import DaliStoreLoader

    return DaliStoreLoader(path, **{"batch_size": 8, "device": "cpu", "seed": 1, **kw})


def test_a_store_with_masks_and_keypoints_is_refused_naming_them(tmp_path: Path) -> None:
    path = make_v2_index_store(tmp_path / "s", 16)
    with pytest.raises(
        StoreOpenError, match=r"field\(s\) 'mask' \(mask\), 'keypoints' \(keypoints\) it cannot"
    ):
        _loader(path)


def test_an_image_and_label_v2_store_is_served_like_v1(tmp_path: Path) -> None:
    n, idx = 30, np.arange(30)
    image = np.zeros((n, 16, 16, 3), np.uint8)
    image[..., 0] = idx[:, None, None]
    valid = np.ones(n, np.uint8)
    valid[[3, 4]] = 0
    fields = (FieldSpec("image", "image"), FieldSpec("label", "label", {"classes": 7}))
    label = np.where(valid == 1, idx % 7, -1)
    spec = BuildSpec(size=16, chunk_samples=4, shard_samples=8)
    path = write_v2_store(
        tmp_path / "s", fields, {"image": image, "label": label}, spec, valid=valid
    )
    batches = collect(_loader(path, drop_last=False))  # the contract's default: as stored
    index = cat(batches, "index")
    assert sorted(index.tolist()) == [i for i in range(n) if i not in (3, 4)]
    for b in batches:
        np.testing.assert_array_equal(decode_index(b["image"]), b["index"])
        np.testing.assert_array_equal(b["label"], b["index"] % 7)


def _image_store(tmp_path: Path, size: Any, options: dict[str, Any]) -> Path:
    from precompute.checks import size_hw

    h, w = size_hw(size)
    image = FieldSpec("image", "image", options)
    st = image.storage(size)
    fields = (image, FieldSpec("label", "label", {"classes": 2}))
    values = {"image": np.full((8, *st.shape), 7, st.dtype), "label": np.arange(8) % 2}
    spec = BuildSpec(size=size, chunk_samples=4, shard_samples=8)
    assert st.shape[:2] == (h, w)
    return write_v2_store(tmp_path / "s", fields, values, spec, valid=np.ones(8, np.uint8))


@pytest.mark.parametrize(
    ("options", "what"), [({"channels": 1}, "1-channel"), ({"bit_depth": 16}, "16-bit")]
)
def test_a_grey_or_16_bit_image_is_refused_naming_it(
    tmp_path: Path, options: dict[str, Any], what: str
) -> None:
    path = _image_store(tmp_path, 16, options)
    with pytest.raises(StoreOpenError, match=r"serves an RGB uint8 'image'.*'image' \(image\)"):
        _loader(path)  # a StoreLoader serves it (tests/loaders/test_stored_choices.py)


def test_a_w_x_h_store_is_served_into_a_square_output(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment

    path = _image_store(tmp_path, "24x16", {})
    with pytest.raises(StoreOpenError, match="frame is 24x16 and DALI's outputs are square"):
        collect(_loader(path, augment=DaliAugment(size=None)))
    batches = collect(_loader(path, augment=DaliAugment(size=12), drop_last=False))
    assert cat(batches, "image").shape[1:] == (3, 12, 12)
