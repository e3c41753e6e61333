"""A whole sample of named fields from real files: decoded, checked and placed together."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.errors import DecodeError
from precompute.fields import FieldSpec
from precompute.fields.assemble import assemble
from precompute.sources.fields import list_field_manifest, list_segmentation
from precompute.stages.decode import decode_bytes
from precompute.stages.resize import resize_image

IMAGE = FieldSpec("image", "image")
MASK = FieldSpec("mask", "mask", {"classes": 3})


def _save(path: Path, img: Image.Image) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    img.save(buf, "JPEG" if path.suffix == ".jpg" else "PNG")
    path.write_bytes(buf.getvalue())


def _mask(ids: np.ndarray) -> Image.Image:
    img = Image.fromarray(ids.astype(np.uint8), "P")
    img.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [7] * 759)
    return img


@pytest.fixture
def seg(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    _save(tmp_path / "images/a.jpg", Image.fromarray(rng.integers(0, 256, (10, 20, 3), np.uint8)))
    _save(tmp_path / "masks/a.png", _mask(np.arange(200).reshape(10, 20) // 7 % 3))
    _save(tmp_path / "images/b.png", Image.new("RGB", (20, 10)))
    _save(tmp_path / "masks/b.png", _mask(np.zeros((8, 8))))
    _save(tmp_path / "images/c.png", Image.new("RGB", (4, 4)))
    _save(tmp_path / "masks/c.png", _mask(np.full((4, 4), 5)))
    return tmp_path


def test_a_segmentation_pair_is_placed_by_one_letterbox(seg: Path) -> None:
    src = list_segmentation(seg)
    item = src.items[0]
    out, extent = assemble(item, [IMAGE, MASK], src.read_bytes, 16, "letterbox", 10**6)
    decoded = decode_bytes(src.read_bytes(item, "image"), "a", 10**6)
    want, want_extent = resize_image(decoded, 16, "letterbox")
    assert extent == want_extent == (4, 0, 8, 16)
    assert np.array_equal(out["image"], want)
    mask = out["mask"]
    assert mask.dtype == np.uint8 and mask.shape == (16, 16)
    assert (mask[:4] == 255).all() and (mask[12:] == 255).all()
    assert set(np.unique(mask[4:12])) == {0, 1, 2}
    ids = np.arange(200).reshape(10, 20) // 7 % 3
    rows = np.floor((np.arange(8) + 0.5) * 10 / 8).astype(int)  # stored centres in the source
    cols = np.floor((np.arange(16) + 0.5) * 20 / 16).astype(int)
    assert np.array_equal(mask[4:12], ids[rows[:, None], cols[None, :]])


def test_a_mask_of_another_size_or_class_is_a_per_input_error(seg: Path) -> None:
    src = list_segmentation(seg)
    with pytest.raises(DecodeError) as info:
        assemble(src.items[1], [IMAGE, MASK], src.read_bytes, 16, "squash", 10**6)
    assert str(info.value) == "masks/b.png: field 'mask' is 8x8 but the image is 20x10"
    with pytest.raises(DecodeError) as info:
        assemble(src.items[2], [IMAGE, MASK], src.read_bytes, 16, "squash", 10**6)
    assert str(info.value) == (
        "masks/c.png: field 'mask' (mask): mask values [5] are outside the classes 0..2 "
        "(ignore_index 255)"
    )
    (seg / "images/a.jpg").unlink()
    with pytest.raises(DecodeError, match=r"images/a\.jpg: cannot read: .*No such file"):
        assemble(src.items[0], [IMAGE, MASK], src.read_bytes, 16, "squash", 10**6)


def test_manifest_fields_keypoints_grey_images_and_arrays(tmp_path: Path) -> None:
    _save(tmp_path / "x/a.png", Image.fromarray(np.full((10, 20), 77, np.uint8), "L"))
    np.save(tmp_path / "x/a.npy", np.arange(6, dtype=np.int16).reshape(2, 3))
    (tmp_path / "m.jsonl").write_text(
        '{"image": "x/a.png", "pts": [[5, 5], [19.5, 2, 2], [30, 1]], "extra": "x/a.npy", '
        '"label": "ceph"}\n'
    )
    fields = [
        FieldSpec("image", "image", {"channels": 1}),
        FieldSpec("pts", "keypoints", {"points": 3}),
        FieldSpec("extra", "array", {"shape": [2, 3], "dtype": "int32"}),
        FieldSpec("label", "label"),
    ]
    src = list_field_manifest(tmp_path / "m.jsonl", fields)
    out, extent = assemble(src.items[0], fields, src.read_bytes, 40, "squash", 10**6)
    assert extent == (0, 0, 40, 40)
    assert out["image"].shape == (40, 40, 1) and (out["image"] == 77).all()
    assert out["pts"].tolist() == [[10, 20, 1], [39, 8, 2], [60, 4, 0]]
    assert out["extra"].dtype == np.int32 and out["extra"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert out["label"] == 0 and src.classes == (("label", ("ceph",)),)


def test_a_bad_array_file_names_the_file(tmp_path: Path) -> None:
    _save(tmp_path / "a.png", Image.new("RGB", (4, 4)))
    (tmp_path / "a.npy").write_bytes(b"not numpy")
    (tmp_path / "m.csv").write_text("image,extra\na.png,a.npy\n")
    fields = [IMAGE, FieldSpec("extra", "array", {"shape": [2], "dtype": "uint8"})]
    src = list_field_manifest(tmp_path / "m.csv", fields)
    with pytest.raises(DecodeError, match=r"^a\.npy: field 'extra': the file is not a \.npy array"):
        assemble(src.items[0], fields, src.read_bytes, 8, "squash", 10**6)
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros(2, np.uint8))
    (tmp_path / "a.npy").write_bytes(buf.getvalue())
    with pytest.raises(DecodeError, match=r"^a\.npy: field 'extra': the file is not a \.npy array"):
        assemble(src.items[0], fields, src.read_bytes, 8, "squash", 10**6)
