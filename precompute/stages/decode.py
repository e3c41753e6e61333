"""Decode stage: encoded bytes -> a Pillow RGB image, guarded and normalised.

Rules (part of ``TRANSFORM_VERSION`` "2"):

- The header is read first; an image whose header claims more than ``max_pixels`` pixels is
  refused before any pixel is decoded (decompression bombs). Pillow's own limit (twice its
  ``MAX_IMAGE_PIXELS``) also applies.
- The EXIF orientation is applied (``ImageOps.exif_transpose``).
- Modes: ``RGB`` as is; ``L``/``1``/``CMYK``/``YCbCr``/... via Pillow's ``convert("RGB")``;
  16-bit and 32-bit integer gray (``I;16*``, ``I``) scaled by ``round(v / 257)`` after
  clipping to [0, 65535] (an input whose values all stay below 4096, 12-bit data such as an
  X-ray, is kept and named in the build's notes: it comes out dark); float gray (``F``) kept
  as is when every value is a whole number in [0, 255], refused otherwise (NaN, infinity, out
  of range, or a fraction such as reflectance in [0, 1]: the scale of the values is unknown,
  and rounding would store a black image); anything with alpha (``RGBA``, ``LA``, ``PA``,
  ``P`` with transparency, ...) composited over white with integer arithmetic
  ``(c * a + 255 * (255 - a) + 127) // 255``.
- The first frame of animated files (GIF, PNG, WebP) is used. A TIFF of several pages is
  refused: its pages are the bands or slices of a cube, an array (``docs/arrays.md``), not
  frames of one picture.

Any failure becomes a :class:`~precompute.errors.DecodeError` naming the key and the reason.

:func:`decode_pixels` is the image field's decoding: the same guard, orientation, pages and
colour rules, but grey sources stay one channel and 16-bit grey keeps its values
(``(H, W, 1)`` uint16); :mod:`precompute.kinds.image` then gives the field its channels and
bit depth (:func:`conform_pixels`: for the default 3 channels at 8 bits, the bytes of
:func:`decode_bytes` exactly).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from precompute.errors import DecodeError
from precompute.notes import note

__all__ = [
    "ARRAY_HINT",
    "RefusedPixelsError",
    "composite_white",
    "conform_pixels",
    "decode_bytes",
    "decode_pixels",
    "to_rgb",
]

_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
ARRAY_HINT = (
    "to keep such values, build the files as arrays (--fields with kind 'array', docs/arrays.md)"
)
_WIDE_GRAY = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I"})
_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF
LOW_BITS = 4096  # 16-bit grey entirely below this is noted: 12-bit data, dark once scaled


class RefusedPixelsError(ValueError):
    """A decoded image whose values no mode rule turns into 8-bit pixels faithfully."""


def composite_white(rgba: Image.Image) -> Image.Image:
    """Composite an ``RGBA`` image over white: ``(c * a + 255 * (255 - a) + 127) // 255``.

    Pillow's masked paste computes exactly that, the nearest integer to ``(c * a + 255 * (255
    - a)) / 255`` (a test checks all 65,536 pairs ``(c, a)``), in one C pass (a one-off
    timing, not benchmark output: 0.56 ms for a 480 x 480 image, the same formula in numpy
    ``uint32`` 9.5 ms).
    """
    out = Image.new("RGB", rgba.size, (255, 255, 255))
    out.paste(rgba, mask=rgba)  # the mask is rgba's alpha band
    return out


def _gray_to_rgb(gray: np.ndarray) -> Image.Image:
    return Image.fromarray(np.repeat(gray[..., None], 3, axis=2), "RGB")


def to_rgb(img: Image.Image, key: str | None = None) -> Image.Image:
    """Convert a decoded image of any mode to 8-bit RGB (rules in the module docstring).

    ``key`` names the input in a build note (:mod:`precompute.notes`): 16-bit grey whose
    values all stay below :data:`LOW_BITS` (12-bit data, which the scaling leaves dark).

    Raises:
        RefusedPixelsError: Float pixels that are not whole numbers in [0, 255].
    """
    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "P" and "transparency" in img.info:
        img, mode = img.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        return composite_white(img.convert("RGBA"))
    if mode in _WIDE_GRAY:
        wide = np.clip(np.asarray(img, dtype=np.int64), 0, 65535)
        if key is not None and 0 < wide.max() < LOW_BITS:  # 12-bit data in 16 bits: dark
            note("gray_low_bits", key)
        return _gray_to_rgb(_narrow(wide))
    if mode == "F":
        return _gray_to_rgb(_float_pixels(np.asarray(img, dtype=np.float64)))
    return img.convert("RGB")


def _float_pixels(flt: np.ndarray) -> np.ndarray:
    """Float gray as uint8 when every value is a whole number in [0, 255]; else refused.

    Raises:
        RefusedPixelsError: Naming the first offending value and what the image holds.
    """
    bad = ~np.isfinite(flt) | (flt < 0) | (flt > 255) | (flt != np.floor(flt))
    if bad.any():
        first = flt.flat[int(np.argmax(bad.ravel()))]
        finite = flt[np.isfinite(flt)]
        span = (
            f"values in [{finite.min():g}, {finite.max():g}]" if finite.size else "no finite values"
        )
        raise RefusedPixelsError(
            f"float pixels are not whole numbers in [0, 255] (e.g. {float(first):g}; "
            f"{span}): {ARRAY_HINT}"
        )
    return flt.astype(np.uint8)


def _open_checked(data: bytes, key: str, max_pixels: int) -> Image.Image:
    if not data:
        raise DecodeError(key, "empty file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise DecodeError(key, f"decompression bomb refused: {exc}") from exc
    except Exception as exc:  # Pillow raises many types on garbage input
        # a TIFF Pillow cannot open is most often a cube (more than 4 samples per pixel)
        hint = f"; a TIFF cube? {ARRAY_HINT}" if data[:4] in _TIFF_MAGIC else ""
        raise DecodeError(key, f"not a readable image ({type(exc).__name__}: {exc}){hint}") from exc
    w, h = img.size
    if w < 1 or h < 1:
        raise DecodeError(key, f"header claims an empty image ({w}x{h})")
    if w * h > max_pixels:
        raise DecodeError(
            key,
            f"header claims {w}x{h} = {w * h} pixels > max_pixels {max_pixels} "
            "(decompression bomb guard)",
        )
    return img


def _narrow(wide: np.ndarray) -> np.ndarray:
    """16-bit values -> 8 bits: ``round(v / 257)`` (``(2 v + 257) // 514``, exact)."""
    return ((wide.astype(np.int64) * 2 + 257) // 514).astype(np.uint8)


def _luma(rgb: np.ndarray) -> np.ndarray:
    """ITU-R 601 grey of ``(H, W, 3)`` pixels, as Pillow's ``convert("L")`` computes it."""
    x = rgb.astype(np.int64)
    grey = (x[..., 0] * 19595 + x[..., 1] * 38470 + x[..., 2] * 7471 + 0x8000) >> 16
    return grey.astype(rgb.dtype)[..., None]


def conform_pixels(value: Any, channels: int, bit_depth: int) -> np.ndarray:
    """``(H, W[, 1 | 3])`` uint8 or uint16 pixels as ``(H, W, channels)`` of ``bit_depth``.

    16 -> 8 bits: ``round(v / 257)``; 8 -> 16 bits: ``v * 257`` (so 255 is 65535); one channel
    -> three: repeated; three -> one: the ITU-R 601 grey (Pillow's ``convert("L")``).

    Raises:
        ValueError: Not an image of that shape, or another dtype (float pixels, int32, ...).
    """
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.ndim == 2:
        a = a[..., None]
    if (
        a.ndim != 3
        or a.shape[2] not in (1, 3)
        or 0 in a.shape
        or a.dtype not in (np.uint8, np.uint16)
    ):
        raise ValueError(
            f"expected (H, W), (H, W, 1) or (H, W, 3) uint8 or uint16 pixels, got "
            f"{a.shape} {a.dtype}"
        )
    if bit_depth == 8 and a.dtype == np.uint16:
        a = _narrow(a)
    elif bit_depth == 16 and a.dtype == np.uint8:
        a = a.astype(np.uint16) * np.uint16(257)
    if a.shape[2] != channels:
        a = np.repeat(a, 3, axis=2) if channels == 3 else _luma(a)
    return a


def _native(img: Image.Image, key: str) -> np.ndarray:
    """The pixels of a decoded image: grey modes one channel (16-bit kept), else RGB."""
    mode = img.mode
    if mode in _WIDE_GRAY:
        return np.clip(np.asarray(img, dtype=np.int64), 0, 65535).astype(np.uint16)[..., None]
    if mode == "F":
        return _float_pixels(np.asarray(img, dtype=np.float64))[..., None]
    if mode in ("L", "1"):
        return np.asarray(img.convert("L") if mode == "1" else img, dtype=np.uint8)[..., None]
    return np.asarray(to_rgb(img, key), dtype=np.uint8)


def decode_pixels(data: bytes, key: str, max_pixels: int) -> np.ndarray:
    """Decode ``data`` into ``(H, W, C)`` pixels as the source holds them.

    C is 1 for a grey source (``L``, ``1``, 16/32-bit integer grey, whole-number float grey)
    and 3 for anything else (the colour rules of :func:`to_rgb`); the dtype is uint16 for
    16/32-bit integer grey (clipped to [0, 65535]), else uint8.

    Raises:
        DecodeError: As :func:`decode_bytes`.
    """
    img = _opened(data, key, max_pixels)
    try:
        return _native(img, key)
    except RefusedPixelsError as exc:
        raise DecodeError(key, str(exc)) from None
    except Exception as exc:  # a mode Pillow cannot convert
        raise DecodeError(key, f"cannot decode ({type(exc).__name__}: {exc})") from exc


def _opened(data: bytes, key: str, max_pixels: int) -> Image.Image:
    """The image of ``data``, guarded, loaded and turned by its EXIF orientation."""
    img = _open_checked(data, key, max_pixels)
    pages = getattr(img, "n_frames", 1)
    if img.format == "TIFF" and pages > 1:
        raise DecodeError(
            key, f"a TIFF of {pages} pages is a cube of bands or slices, not an image: {ARRAY_HINT}"
        )
    try:
        img.load()
        return ImageOps.exif_transpose(img)
    except Exception as exc:  # truncated or corrupt data, bad EXIF, ...
        raise DecodeError(key, f"cannot decode ({type(exc).__name__}: {exc})") from exc


def decode_bytes(data: bytes, key: str, max_pixels: int) -> Image.Image:
    """Decode ``data`` into an RGB image, applying the guard, EXIF orientation and mode rules.

    Raises:
        DecodeError: Empty, not an image, truncated, corrupt, or over ``max_pixels``.
    """
    img = _opened(data, key, max_pixels)
    try:
        return to_rgb(img, key)
    except DecodeError:
        raise
    except RefusedPixelsError as exc:  # a mode rule refused the values: its own message
        raise DecodeError(key, str(exc)) from None
    except Exception as exc:  # truncated or corrupt data, bad EXIF, ...
        raise DecodeError(key, f"cannot decode ({type(exc).__name__}: {exc})") from exc
