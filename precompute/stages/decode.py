"""Decode stage: encoded bytes -> a Pillow RGB image, guarded and normalised.

Rules (part of ``TRANSFORM_VERSION`` "1"):

- The header is read first; an image whose header claims more than ``max_pixels`` pixels is
  refused before any pixel is decoded (decompression bombs). Pillow's own limit (twice its
  ``MAX_IMAGE_PIXELS``) also applies.
- The EXIF orientation is applied (``ImageOps.exif_transpose``).
- Modes: ``RGB`` as is; ``L``/``1``/``CMYK``/``YCbCr``/... via Pillow's ``convert("RGB")``;
  16-bit and 32-bit integer gray (``I;16*``, ``I``) scaled by ``round(v / 257)`` after clipping
  to [0, 65535]; float gray (``F``) clipped to [0, 255] and rounded; anything with alpha
  (``RGBA``, ``LA``, ``PA``, ``P`` with transparency, ...) composited over white with integer
  arithmetic ``(c * a + 255 * (255 - a) + 127) // 255``.
- The first frame of animated files is used.

Any failure becomes a :class:`~precompute.errors.DecodeError` naming the key and the reason.
"""

from __future__ import annotations

import io
import warnings
from typing import Any, ClassVar

import numpy as np
from PIL import Image, ImageOps

from precompute.errors import DecodeError
from precompute.stages.base import Port, SampleContext, Stage

__all__ = ["Decode", "decode_bytes", "to_rgb"]

_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_WIDE_GRAY = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I"})


def _composite_white(rgba: np.ndarray) -> np.ndarray:
    """Composite an (H, W, 4) uint8 array over white with exact integer arithmetic."""
    rgb = rgba[..., :3].astype(np.uint32)
    a = rgba[..., 3:4].astype(np.uint32)
    return ((rgb * a + 255 * (255 - a) + 127) // 255).astype(np.uint8)


def _gray_to_rgb(gray: np.ndarray) -> Image.Image:
    return Image.fromarray(np.repeat(gray[..., None], 3, axis=2), "RGB")


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert a decoded image of any mode to 8-bit RGB (rules in the module docstring)."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "P" and "transparency" in img.info:
        img, mode = img.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        rgba = np.asarray(img.convert("RGBA"), dtype=np.uint8)
        return Image.fromarray(_composite_white(rgba), "RGB")
    if mode in _WIDE_GRAY:
        wide = np.clip(np.asarray(img, dtype=np.int64), 0, 65535)
        return _gray_to_rgb(((wide * 2 + 257) // 514).astype(np.uint8))
    if mode == "F":
        flt = np.nan_to_num(np.asarray(img, dtype=np.float64), nan=0.0)
        return _gray_to_rgb(np.rint(np.clip(flt, 0, 255)).astype(np.uint8))
    return img.convert("RGB")


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
        raise DecodeError(key, f"not a readable image ({type(exc).__name__}: {exc})") from exc
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


def decode_bytes(data: bytes, key: str, max_pixels: int) -> Image.Image:
    """Decode ``data`` into an RGB image, applying the guard, EXIF orientation and mode rules.

    Raises:
        DecodeError: Empty, not an image, truncated, corrupt, or over ``max_pixels``.
    """
    img = _open_checked(data, key, max_pixels)
    try:
        img.load()
        img = ImageOps.exif_transpose(img)
        return to_rgb(img)
    except DecodeError:
        raise
    except Exception as exc:  # truncated or corrupt data, bad EXIF, ...
        raise DecodeError(key, f"cannot decode ({type(exc).__name__}: {exc})") from exc


class Decode(Stage):
    """bytes -> Pillow RGB image of the source's (oriented) size."""

    name: ClassVar[str] = "decode"
    consumes: ClassVar[Port] = Port("bytes")

    def __init__(self, max_pixels: int) -> None:
        self.max_pixels = max_pixels

    def produces(self) -> Port:
        """An RGB image of any size."""
        return Port("image")

    def __call__(self, value: Any, ctx: SampleContext) -> Image.Image:
        """Decode one file's bytes."""
        return decode_bytes(value, ctx.key, self.max_pixels)
