"""Stages on real encoded bytes: decode rules per mode, guards, resize modes, augmentation."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute import BuildSpec, DecodeError
from precompute.fields import v1_fields
from precompute.fields.assemble import assemble
from precompute.fields.geometry import variant_draws
from precompute.sample import make_image
from precompute.sources.fields import FieldItem
from precompute.stages.augment import augment_variant
from precompute.stages.decode import composite_white, decode_bytes
from precompute.stages.resize import resize_image
from tests.precompute.conftest import bad_inputs, reference_rgb


def _encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def test_decode_matches_reference_for_every_sample_mode(small_dataset: Path) -> None:
    seen = set()
    for path in sorted(small_dataset.rglob("*.*")):
        with Image.open(path) as im:
            seen.add(im.mode if im.getexif().get(0x0112, 1) == 1 else "EXIF")
        got = decode_bytes(path.read_bytes(), path.name, 10**8)
        assert got.mode == "RGB"
        assert np.array_equal(np.asarray(got), np.asarray(reference_rgb(path))), path
    assert {"L", "LA", "RGBA", "P", "CMYK", "I;16", "EXIF", "RGB"} <= seen


def test_sixteen_bit_is_scaled_not_clipped() -> None:
    wide = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    got = np.asarray(decode_bytes(_encode(Image.fromarray(wide), "PNG"), "w.png", 100))
    assert got[0, :, 0].tolist() == [0, 1, 128, 255]
    assert np.array_equal(got[..., 0], got[..., 2])


def test_alpha_and_transparent_palette_composited_over_white() -> None:
    rgba = Image.new("RGBA", (4, 4), (200, 0, 0, 0))
    assert np.all(np.asarray(decode_bytes(_encode(rgba, "PNG"), "a.png", 100)) == 255)
    half = Image.new("RGBA", (4, 4), (0, 0, 0, 128))
    assert np.all(np.asarray(decode_bytes(_encode(half, "PNG"), "h.png", 100)) == 127)
    pal = Image.new("P", (4, 4), 1)
    pal.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    got = decode_bytes(_encode(pal, "PNG", transparency=1), "p.png", 100)
    assert np.all(np.asarray(got) == 255)


def test_composite_over_white_is_the_documented_integer_formula_for_every_pair() -> None:
    c, a = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    rgba = np.stack([c, 255 - c, c // 2, a], -1).astype(np.uint8)  # every (c, a) pair
    got = np.asarray(composite_white(Image.fromarray(rgba, "RGBA"))).astype(np.int64)
    rgb, alpha = rgba[..., :3].astype(np.int64), rgba[..., 3:].astype(np.int64)
    assert np.array_equal(got, (rgb * alpha + 255 * (255 - alpha) + 127) // 255)


def test_exif_orientation_applied() -> None:
    img = make_image(0, 1, 0, (40, 20))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 270 (i.e. 90 clockwise) on display
    got = decode_bytes(_encode(img, "JPEG", exif=exif.tobytes(), quality=95), "e.jpg", 10**6)
    assert got.size == (20, 40)


@pytest.mark.parametrize("name", sorted(bad_inputs()))
def test_bad_inputs_raise_decode_error_naming_the_key(name: str) -> None:
    data = bad_inputs()[name]
    if name == "bitflip_body.jpg":  # may decode to garbage or fail, but never crash or hang
        try:
            assert decode_bytes(data, name, 10**8).mode == "RGB"
        except DecodeError as exc:
            assert exc.key == name
        return
    with pytest.raises(DecodeError) as info:
        decode_bytes(data, name, 10**8)
    assert info.value.key == name and str(info.value).startswith(name)


def test_pixel_guard_checks_header_before_decoding() -> None:
    with pytest.raises(DecodeError, match="max_pixels 1000"):
        decode_bytes(_encode(make_image(0, 0, 0, (50, 50)), "PNG"), "big.png", 1000)


@pytest.mark.parametrize("w, h", [(60, 30), (30, 60), (17, 17), (100, 3)])
def test_resize_modes(w: int, h: int) -> None:
    img = make_image(0, 2, 1, (w, h))
    for mode in ("squash", "center-crop"):
        px, ext = resize_image(img, 16, mode)
        assert px.shape == (16, 16, 3) and px.dtype == np.uint8 and ext == (0, 0, 16, 16)
    px, (top, left, eh, ew) = resize_image(img, 16, "letterbox", fill=7)
    assert max(eh, ew) == 16 and top == (16 - eh) // 2 and left == (16 - ew) // 2
    inner = px[top : top + eh, left : left + ew]
    assert np.array_equal(inner, np.asarray(img.resize((ew, eh), Image.Resampling.BILINEAR)))
    mask = np.ones((16, 16), bool)
    mask[top : top + eh, left : left + ew] = False
    assert np.all(px[mask] == 7)


def test_augment_is_seeded_by_build_seed_slot_and_variant() -> None:
    img = make_image(0, 3, 2, (64, 48))
    spec = BuildSpec(size=16, variants=3)
    a = augment_variant(img, 16, spec.augment, 5, 10, 1)
    assert np.array_equal(a, augment_variant(img, 16, spec.augment, 5, 10, 1))
    for other in [(6, 10, 1), (5, 11, 1), (5, 10, 2)]:
        assert not np.array_equal(a, augment_variant(img, 16, spec.augment, *other))
    item = FieldItem("k.png", (("image", "k.png"),), (("label", 0),))
    draws = variant_draws(5, 10, 3, 16, spec.augment)
    out, ext = assemble(item, v1_fields(), lambda _i, _f: _encode(img, "PNG"), 16, "squash", 10**8,
                        variants=draws)  # fmt: skip
    assert out["image"].shape == (3, 16, 16, 3) and ext.tolist() == [[0, 0, 16, 16]] * 3
    assert np.array_equal(out["image"][1], a)


def _tiff(array: np.ndarray) -> bytes:
    import tifffile

    buf = io.BytesIO()
    tifffile.imwrite(buf, array)
    return buf.getvalue()


def test_a_multi_page_tiff_is_refused_as_an_image_naming_the_pages() -> None:
    cube = np.arange(20 * 8 * 8, dtype=np.float32).reshape(20, 8, 8)  # 20 bands, as pages
    with pytest.raises(DecodeError, match=r"cube\.tif: a TIFF of 20 pages is a cube .* array"):
        decode_bytes(_tiff(cube), "cube.tif", 10**6)
    frames = [Image.new("L", (8, 8), v) for v in (10, 200)]  # animated GIF: its first frame
    gif = _encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    assert np.asarray(decode_bytes(gif, "a.gif", 10**6))[0, 0].tolist() == [10, 10, 10]


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        ([0.25, 0.5], r"e\.g\. 0\.25; values in \[0\.25, 0\.5\]"),  # reflectance in [0, 1]
        ([12.0, 300.0], r"e\.g\. 300; values in \[12, 300\]"),
        ([np.nan, 3.0], r"e\.g\. nan; values in \[3, 3\]"),
        ([-1.0, 3.0], r"e\.g\. -1"),
    ],
)
def test_float_pixels_are_refused_unless_whole_numbers_in_0_255(
    values: list[float], shown: str
) -> None:
    flt = np.array([values * 2], dtype=np.float32)
    with pytest.raises(DecodeError, match=rf"r\.tif: float pixels are not whole .*{shown}"):
        decode_bytes(_tiff(flt), "r.tif", 10**6)
    whole = np.array([[0.0, 1.0, 128.0, 255.0]], dtype=np.float32)
    got = np.asarray(decode_bytes(_tiff(whole), "w.tif", 10**6))
    assert got[0, :, 1].tolist() == [0, 1, 128, 255]


def test_a_tiff_pillow_cannot_open_hints_at_arrays() -> None:
    import tifffile

    buf = io.BytesIO()  # 6 samples per pixel: a small multispectral cube Pillow cannot read
    tifffile.imwrite(
        buf, np.zeros((8, 8, 6), np.uint16), photometric="minisblack", planarconfig="contig"
    )
    with pytest.raises(DecodeError, match=r"ms\.tif: not a readable image .*a TIFF cube\? "):
        decode_bytes(buf.getvalue(), "ms.tif", 10**6)
    with pytest.raises(DecodeError, match=r"not a readable image \(Unidentified[^;]*$"):
        decode_bytes(b"GIF89a garbage", "g.gif", 10**6)  # not a TIFF: no such hint
