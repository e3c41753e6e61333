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

A frame of ``W x H`` (``--size 512x384``) follows the same rules with the frame's aspect
ratio in place of the square's: ``center-crop`` takes the centred box of that ratio (the whole
height of a wider source, ``h * W / H`` of its width), ``letterbox`` fits the source inside
``W x H`` (the side that meets the frame first becomes its side). For ``W == H`` both are the
square rules above, number for number.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from precompute.errors import SpecError
from precompute.spec import MODES

__all__ = ["FILTER", "center_crop_box", "letterbox_size", "resize_image"]

FILTER = Image.Resampling.BILINEAR


def center_crop_box(
    w: int, h: int, frame: tuple[int, int] | None = None
) -> tuple[float, float, float, float]:
    """Return the source box of the centred region of the frame's aspect ratio.

    ``frame``: ``(width, height)`` of the stored frame; None (or a square): the centred
    square of side ``min(w, h)``.
    """
    if frame is None or frame[0] == frame[1]:
        side = min(w, h)
        left, top = (w - side) / 2, (h - side) / 2
        return (left, top, left + side, top + side)
    fw, fh = frame
    if w * fh >= h * fw:  # wider than the frame: the whole height, a centred part of the width
        cw, ch = h * fw / fh, float(h)
    else:
        cw, ch = float(w), w * fh / fw
    left, top = (w - cw) / 2, (h - ch) / 2
    return (left, top, left + cw, top + ch)


def letterbox_size(w: int, h: int, size: int | tuple[int, int]) -> tuple[int, int]:
    """Return the ``(width, height)`` an image of ``w x h`` gets inside the frame.

    ``size``: the side of a square frame, or ``(width, height)``.
    """
    fw, fh = (size, size) if isinstance(size, int) else size
    if w * fh >= h * fw:  # for a square frame: w >= h
        return fw, max(1, round(h * fw / w))
    return max(1, round(w * fh / h)), fh


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
