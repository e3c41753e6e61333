"""Resize stage: an RGB image -> an S x S x 3 uint8 array and its valid extent.

Modes (part of ``TRANSFORM_VERSION`` "2"; the filter is always ``FILTER``, bilinear with
Pillow's antialiasing support):

- ``squash``: ``img.resize((S, S))``; extent ``(0, 0, S, S)``.
- ``center-crop``: the centred square of side ``min(w, h)`` is resized to S x S in one step
  (``img.resize((S, S), box=...)``, sub-pixel box); extent ``(0, 0, S, S)``.
- ``letterbox``: the image is resized to fit inside S x S keeping its aspect ratio (the long
  side becomes S, the short side ``max(1, round(short * S / long))``), pasted centred (top/left
  offsets rounded down) on a canvas of ``fill``; extent is the pasted region
  ``(top, left, height, width)``.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from precompute.errors import SpecError
from precompute.spec import MODES

__all__ = ["FILTER", "center_crop_box", "letterbox_size", "resize_image"]

FILTER = Image.Resampling.BILINEAR


def center_crop_box(w: int, h: int) -> tuple[float, float, float, float]:
    """Return the source box of the centred square of side ``min(w, h)``."""
    side = min(w, h)
    left, top = (w - side) / 2, (h - side) / 2
    return (left, top, left + side, top + side)


def letterbox_size(w: int, h: int, size: int) -> tuple[int, int]:
    """Return the ``(width, height)`` an image of ``w x h`` gets inside ``size x size``."""
    if w >= h:
        return size, max(1, round(h * size / w))
    return max(1, round(w * size / h)), size


def resize_image(
    img: Image.Image, size: int, mode: str, fill: int = 0
) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """Resize an RGB image by ``mode``; return ``(pixels (S, S, 3) uint8, extent)``."""
    w, h = img.size
    if mode == "squash":
        out = img.resize((size, size), FILTER)
    elif mode == "center-crop":
        out = img.resize((size, size), FILTER, box=center_crop_box(w, h))
    elif mode == "letterbox":
        nw, nh = letterbox_size(w, h, size)
        top, left = (size - nh) // 2, (size - nw) // 2
        out = Image.new("RGB", (size, size), (fill, fill, fill))
        out.paste(img.resize((nw, nh), FILTER), (left, top))
        return np.asarray(out, dtype=np.uint8), (top, left, nh, nw)
    else:
        raise SpecError(f"mode must be one of {MODES}, got {mode!r}")
    return np.asarray(out, dtype=np.uint8), (0, 0, size, size)
