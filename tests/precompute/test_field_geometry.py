"""Build-side geometry of named fields: one placement moves image, mask and keypoints together."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from precompute.errors import DecodeError, SpecError
from precompute.fields import FieldSpec
from precompute.fields.geometry import (
    check_frame,
    place_field,
    place_image,
    place_keypoints,
    place_mask,
    placement,
)
from precompute.fields.masks import decode_mask
from precompute.spec import MODES
from precompute.stages.decode import decode_bytes
from precompute.stages.resize import resize_image

MASK = FieldSpec("mask", "mask", {"classes": 4})
SHAPES = [(10, 7), (7, 10), (9, 9), (33, 20)]


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _photo(w: int, h: int) -> np.ndarray:
    rng = np.random.default_rng(w * 100 + h)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("w", "h"), SHAPES)
def test_images_are_placed_exactly_as_format_v1_resizes_them(mode: str, w: int, h: int) -> None:
    pixels = _photo(w, h)
    img = decode_bytes(_png(Image.fromarray(pixels)), "a.png", 10**6)
    want, extent = resize_image(img, 16, mode, fill=9)
    p = placement(w, h, 16, mode)
    assert p.extent == extent
    assert np.array_equal(place_image(np.asarray(img), p, 9), want)
    gray = place_image(pixels[..., :1], p, 9)
    assert gray.shape == (16, 16, 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("w", "h"), SHAPES)
def test_masks_take_the_source_pixel_under_each_stored_centre(mode: str, w: int, h: int) -> None:
    ids = np.arange(w * h, dtype=np.int64).reshape(h, w)  # every pixel its own id
    p = placement(w, h, 24, mode)
    out = place_mask(ids, p, 999_999)
    top, left, eh, ew = p.extent
    assert (np.delete(out, np.s_[top : top + eh], 0) == 999_999).all()  # letterbox padding
    assert (np.delete(out, np.s_[left : left + ew], 1) == 999_999).all()
    bl, bt, br, bb = p.box
    cy = bt + (np.arange(eh) + 0.5) * (bb - bt) / eh  # source y of each stored pixel centre
    cx = bl + (np.arange(ew) + 0.5) * (br - bl) / ew
    want = ids[np.floor(cy).astype(int)[:, None], np.floor(cx).astype(int)[None, :]]
    assert np.array_equal(out[top : top + eh, left : left + ew], want)


def test_mask_values_are_never_blended() -> None:
    rng = np.random.default_rng(0)
    mask = rng.choice(np.array([0, 3], np.uint8), (37, 23))
    for mode in MODES:
        for size in (8, 64):
            out = place_field(MASK, mask, placement(23, 37, size, mode))
            assert set(np.unique(out)) <= {0, 3, 255} and out.dtype == np.uint8


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("w", "h"), SHAPES[:3])
def test_keypoints_land_on_the_pixel_their_source_pixel_became(mode: str, w: int, h: int) -> None:
    # upscaling: each stored pixel's centre lies in one source pixel, so the stored mask of
    # pixel ids tells which source pixel a stored position shows
    ids = np.arange(w * h, dtype=np.int64).reshape(h, w)
    p = placement(w, h, 40, mode)
    stored = place_mask(ids, p, -1)
    jj, ii = np.meshgrid(np.arange(w), np.arange(h))
    pts = np.stack([jj.ravel() + 0.5, ii.ravel() + 0.5, np.ones(w * h)], 1)
    out = place_keypoints(pts, p)
    seen = out[:, 2] > 0
    assert seen.any()
    x, y = out[seen, 0].astype(int), out[seen, 1].astype(int)
    assert np.array_equal(stored[y, x], ids.ravel()[seen])
    if mode != "center-crop":
        assert seen.all()


def test_keypoint_maps_by_mode() -> None:
    pts = np.array([[0, 0, 1], [20, 10, 2], [4.5, 9.9, 1], [2, 5, 0]], dtype=np.float32)
    sq = place_keypoints(pts, placement(20, 10, 40, "squash"))
    assert np.allclose(sq, [[0, 0, 1], [40, 40, 0], [9, 39.6, 1], [4, 20, 0]])
    lb = place_keypoints(pts, placement(20, 10, 40, "letterbox"))  # 40x20 pasted at top 10
    assert np.allclose(lb, [[0, 10, 1], [40, 30, 0], [9, 29.8, 1], [4, 20, 0]])
    cc = place_keypoints(pts, placement(20, 10, 40, "center-crop"))  # box x in [5, 15)
    assert np.allclose(cc[:, :2], [[-20, 0], [60, 40], [-2, 39.6], [-12, 20]])
    assert cc[:, 2].tolist() == [0, 0, 0, 0]
    odd = place_keypoints(np.array([[1.0, 0.5, 1]]), placement(4, 3, 30, "center-crop"))
    assert np.allclose(odd, [[5.0, 5.0, 1]])  # box (0.5, 0, 3.5, 3): scale 10


def test_a_mask_of_another_size_names_both_sizes() -> None:
    with pytest.raises(DecodeError, match=r"masks/a.png: field 'mask' is 5x4 but the image is 6x4"):
        check_frame("masks/a.png", "mask", np.zeros((4, 5)), (6, 4))


def test_an_unknown_mode_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="mode must be one of"):
        placement(4, 4, 8, "stretch")


# -- mask files ------------------------------------------------------------------------------


def _palette(ids: np.ndarray) -> bytes:
    img = Image.fromarray(ids.astype(np.uint8), "P")
    img.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9] + [0] * 756)
    return _png(img)


def test_palette_and_grey_masks_read_as_class_ids() -> None:
    ids = np.array([[0, 1, 2], [3, 3, 0]])
    assert np.array_equal(decode_mask(_palette(ids), "m.png", MASK, 10**6), ids)
    grey = _png(Image.fromarray(ids.astype(np.uint8), "L"))
    assert np.array_equal(decode_mask(grey, "m.png", MASK, 10**6), ids)
    with_ignore = _png(Image.fromarray(np.array([[0, 255]], np.uint8), "L"))
    assert decode_mask(with_ignore, "m.png", MASK, 10**6).tolist() == [[0, 255]]


def test_rgb_masks_need_a_colour_map() -> None:
    rgb = np.zeros((2, 2, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    data = _png(Image.fromarray(rgb, "RGB"))
    with pytest.raises(
        DecodeError, match=r"m.png: field 'mask' \(mask\): an RGB mask needs a colormap"
    ):
        decode_mask(data, "m.png", MASK, 10**6)
    mapped = FieldSpec("mask", "mask", {"classes": 2, "colormap": [[0, 0, 0], [255, 0, 0]]})
    assert decode_mask(data, "m.png", mapped, 10**6).tolist() == [[1, 0], [0, 0]]
    rgb[1, 1] = (0, 0, 7)
    with pytest.raises(DecodeError, match=r"colour \(0, 0, 7\) is not in the colormap"):
        decode_mask(_png(Image.fromarray(rgb, "RGB")), "m.png", mapped, 10**6)


def test_mask_values_outside_the_classes_are_an_error_naming_them() -> None:
    ids = np.array([[0, 4], [7, 255]])
    with pytest.raises(DecodeError) as info:
        decode_mask(_palette(ids), "masks/b.png", MASK, 10**6)
    assert str(info.value) == (
        "masks/b.png: field 'mask' (mask): mask values [4, 7] are outside the classes 0..3 "
        "(ignore_index 255)"
    )


def test_masks_without_class_ids_or_not_images_are_refused() -> None:
    la = _png(Image.new("LA", (2, 2)))
    with pytest.raises(DecodeError, match="mask mode LA holds no class ids"):
        decode_mask(la, "m.png", MASK, 10**6)
    with pytest.raises(DecodeError, match=r"m\.png: not a readable image"):
        decode_mask(b"not a png", "m.png", MASK, 10**6)
    with pytest.raises(DecodeError, match="max_pixels"):
        decode_mask(_palette(np.zeros((20, 20))), "m.png", MASK, 100)


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(1, 60), h=st.integers(1, 60), size=st.integers(1, 48), mode=st.sampled_from(MODES)
)
def test_each_stored_mask_pixel_is_the_source_pixel_under_its_centre(
    w: int, h: int, size: int, mode: str
) -> None:
    # a source pixel's centre, mapped as a keypoint, lands within half a source pixel (in
    # stored units) of the centre of every stored pixel that took that source pixel's id
    ids = np.arange(w * h, dtype=np.int64).reshape(h, w)
    p = placement(w, h, size, mode)
    stored = place_mask(ids, p, -1)
    top, left, eh, ew = p.extent
    inner = stored[top : top + eh, left : left + ew]
    i, j = np.divmod(inner.ravel(), w)
    pts = place_keypoints(np.stack([j + 0.5, i + 0.5, np.ones(i.size)], 1), p).astype(np.float64)
    yy, xx = np.meshgrid(np.arange(eh) + top + 0.5, np.arange(ew) + left + 0.5, indexing="ij")
    bl, bt, br, bb = p.box
    assert (np.abs(pts[:, 0] - xx.ravel()) <= 0.5 * ew / (br - bl) + 1e-4).all()
    assert (np.abs(pts[:, 1] - yy.ravel()) <= 0.5 * eh / (bb - bt) + 1e-4).all()


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        (np.zeros((1, 8, 3), np.uint8), "returned uint8 of shape (1, 8, 3)"),  # would broadcast
        (np.zeros((8, 8, 3), np.float32), "returned float32 of shape (8, 8, 3)"),  # truncated
    ],
)
def test_a_rule_that_returns_what_the_field_does_not_store_is_refused(
    monkeypatch: pytest.MonkeyPatch, returned: np.ndarray, said: str
) -> None:
    """A kind plugin's build rule is checked against its storage: numpy would otherwise
    broadcast a row into every row of the sample, or cast floats into the uint8 array."""
    from precompute.fields import geometry

    image = FieldSpec("image", "image", {})
    p = placement(10, 7, 8, "letterbox")
    assert place_field(image, _photo(10, 7), p).shape == (8, 8, 3)  # the real rule passes
    monkeypatch.setitem(geometry._PLACE, image.resample, lambda value, p, pad: returned)
    with pytest.raises(SpecError) as caught:
        place_field(image, _photo(10, 7), p)
    assert str(caught.value) == (
        f"fields.image: the build rule {image.resample!r} of kind 'image' {said}; the field "
        "stores uint8 of shape (8, 8, 3)"
    )


def test_an_option_that_json_cannot_hold_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's option of NaN (a natural "no depth" fill) made a store whose metadata is
    not JSON and that its own readers refused; it is refused when the field is made."""
    from types import MappingProxyType

    from precompute.fields import registry
    from precompute.fields.kinds import LabelKind
    from precompute.fields.options import Option

    class Depthish(LabelKind):
        name = "depthish"
        options = MappingProxyType({"fill": Option(0.0, lambda where, value: value)})

    monkeypatch.setitem(registry._KINDS, "depthish", Depthish())
    assert FieldSpec("d", "depthish", {"fill": -1.5}).options["fill"] == -1.5
    for bad in (float("nan"), float("inf"), [1.0, float("-inf")]):
        with pytest.raises(SpecError, match=r"^fields.d.fill must hold finite numbers"):
            FieldSpec("d", "depthish", {"fill": bad})
