"""Mask files a new user brings: JPEG masks, 16-bit ids, binary 0/255 masks, EXIF turns.

Real encoded bytes through the real decoder (and the real pair check of ``assemble``).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from precompute.errors import DecodeError
from precompute.fields import FieldSpec
from precompute.fields.assemble import assemble
from precompute.fields.masks import decode_mask
from precompute.sources.fields import FieldItem

IDS = np.zeros((24, 32), np.uint8)
IDS[4:20, 6:20], IDS[10:14, 2:30], IDS[0:3] = 1, 3, 2


def encode(array: np.ndarray, fmt: str = "PNG", **kw: Any) -> bytes:
    """``array`` as an image file of format ``fmt``."""
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt, **kw)
    return out.getvalue()


def mask(**options: Any) -> FieldSpec:
    """A mask field (4 classes unless told)."""
    return FieldSpec("mask", "mask", {"classes": 4, **options})


def test_a_jpeg_mask_is_refused_with_a_hint_to_save_png() -> None:
    data = encode(IDS, "JPEG", quality=95)
    with pytest.raises(
        DecodeError, match=r"m\.jpg: field 'mask' \(mask\): a JPEG mask is lossy.*PNG"
    ):
        decode_mask(data, "m.jpg", mask(), 10**6)


def test_16_bit_masks_keep_ids_above_255_and_a_wide_ignore_index() -> None:
    wide = np.where(IDS > 0, IDS.astype(np.uint16) + 296, 0).astype(np.uint16)
    wide[0, 0] = 65535
    out = decode_mask(encode(wide), "m.png", mask(classes=300, ignore_index=65535), 10**6)
    assert out.dtype == np.uint16 and np.array_equal(out, wide)


def test_a_binary_0_255_mask_is_refused_rather_than_all_ignored() -> None:
    binary = (IDS > 0).astype(np.uint8) * 255
    with pytest.raises(DecodeError, match=r"m\.png: .*looks binary.*--colormap"):
        decode_mask(encode(binary), "m.png", mask(classes=2), 10**6)


def test_a_binary_mask_maps_through_a_grey_colormap() -> None:
    binary = (IDS > 0).astype(np.uint8) * 255
    field = mask(classes=2, colormap=[[0, 0, 0], [255, 255, 255]])
    assert np.array_equal(decode_mask(encode(binary), "m.png", field, 10**6), IDS > 0)


def _exif_turned(array: np.ndarray) -> bytes:
    """A PNG of ``array`` stored turned, with EXIF orientation 6 (display: turn it back)."""
    img = Image.fromarray(np.rot90(array, 1).copy())
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW to display
    out = io.BytesIO()
    img.save(out, "PNG", exif=exif)
    return out.getvalue()


def test_each_file_turns_by_its_own_exif_and_a_swapped_pair_says_so() -> None:
    image = np.repeat(IDS[..., None] * 60, 3, axis=2)
    files = {"image": _exif_turned(image), "mask": encode(IDS)}
    item = FieldItem("a.png", (("image", "a.png"), ("mask", "a_mask.png")))
    fields = (FieldSpec("image", "image", {}), mask())
    values, _ = assemble(item, fields, lambda _i, f: files[f], 32, "squash", 10**6)
    assert values["mask"].shape == (32, 32)  # the image's EXIF turned it back: frames agree
    files["mask"] = encode(np.rot90(IDS, 1).copy())  # the mask left in the turned frame
    with pytest.raises(DecodeError, match=r"a_mask\.png: .*swapped.*EXIF orientation"):
        assemble(item, fields, lambda _i, f: files[f], 32, "squash", 10**6)
