"""Resample a cube band by band, in float64 with antialiasing; place it in the stored frame.

Each band of an ``(H, W, C)`` cube is resized separably with the antialiased triangle filter
of Pillow's (and torch's ``interpolate(..., mode="bilinear", antialias=True)``) bilinear
resize: output pixel ``j`` of a box ``[a, b)`` resized to ``n`` pixels has its centre at
``a + (j + 0.5) * (b - a) / n`` and averages the source pixels within ``max(scale, 1)`` of it,
weighted by a triangle, weights normalised. The arithmetic is float64 whatever the dtype;
integers are rounded half to even and clipped to their dtype's range, floats cast back to
their dtype. Nothing goes through 8 bits.

* An identical size returns the values bit-exact (no arithmetic at all).
* :func:`place_array` is the build rule ``array`` (a ``PLACE`` function): the box of a
  :class:`~precompute.fields.geometry.Placement` (``squash``, ``center-crop`` with its
  half-pixel box, ``letterbox``) is resized to ``out`` and pasted at ``offset`` in an
  ``S x S`` frame filled with ``pad``, exactly the map the image and mask rules use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from precompute.errors import SpecError

if TYPE_CHECKING:
    from precompute.fields.geometry import Placement

__all__ = ["band_weights", "place_array", "resample_bands", "resize_box"]


def band_weights(start: float, stop: float, n: int, length: int) -> np.ndarray:
    """``(n, length)`` float64 weights resizing the source span ``[start, stop)`` to ``n``.

    Row ``j`` sums to 1; its nonzero entries are the source pixels under the triangle
    centred on output pixel ``j``'s centre (clipped to the source frame ``[0, length)``).
    """
    scale = (stop - start) / n
    support = max(scale, 1.0)
    centre = start + (np.arange(n, dtype=np.float64) + 0.5) * scale
    pixel = np.arange(length, dtype=np.float64) + 0.5
    w = np.clip(1.0 - np.abs(pixel[None, :] - centre[:, None]) / support, 0.0, None)
    total = w.sum(axis=1, keepdims=True)
    nearest = np.clip(np.floor(centre).astype(np.int64), 0, length - 1)
    empty = total[:, 0] == 0  # a centre outside the frame: take its nearest pixel
    w[empty, nearest[empty]] = 1.0
    return w / np.where(empty[:, None], 1.0, total)


def _cast(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """float64 values as ``dtype``: integers rounded and clipped to the dtype's range."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(np.clip(np.rint(values), info.min, info.max), dtype=dtype)
    if dtype.kind == "b":
        return np.asarray(values >= 0.5)
    return values.astype(dtype)


def _check_cube(cube: np.ndarray) -> None:
    if cube.ndim != 3 or min(cube.shape) < 1:
        raise SpecError(f"a cube must be (H, W, C) with every side >= 1, got {list(cube.shape)}")
    if cube.dtype.kind not in "biuf":
        raise SpecError(f"a cube must hold real numbers, got dtype {cube.dtype}")


def resize_box(
    cube: np.ndarray, box: tuple[float, float, float, float], out: tuple[int, int]
) -> np.ndarray:
    """Resize the region ``box`` = ``(left, top, right, bottom)`` of ``cube`` to ``out`` = (w, h).

    Returns:
        ``(h, w, C)`` of ``cube``'s dtype; the values bit-exact when the box is the whole
        frame and ``out`` its size.
    """
    _check_cube(cube)
    h, w = cube.shape[:2]
    if box == (0.0, 0.0, float(w), float(h)) and out == (w, h):
        return cube.copy()
    rows = band_weights(box[1], box[3], out[1], h)
    cols = band_weights(box[0], box[2], out[0], w)
    values = np.einsum("ih,hwc->iwc", rows, cube.astype(np.float64))
    return _cast(np.einsum("jw,iwc->ijc", cols, values), cube.dtype)


def resample_bands(cube: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """Resize every band of ``(H, W, C)`` ``cube`` to ``size`` (a side, or ``(H', W')``).

    Raises:
        SpecError: Not an ``(H, W, C)`` cube of real numbers, or a size below 1.
    """
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    if min(height, width) < 1:
        raise SpecError(f"size must be >= 1, got {size!r}")
    _check_cube(cube)
    return resize_box(cube, (0.0, 0.0, float(cube.shape[1]), float(cube.shape[0])), (width, height))


def place_array(value: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """The build rule ``array``: resize ``value``'s placement box and paste it in ``S x S``.

    Args:
        value: ``(H, W, C)`` cube whose ``(W, H)`` is the placement's frame.
        p: The sample's placement (one for every spatial field of it).
        pad: The value of stored pixels outside the pasted box (letterbox).

    Returns:
        ``(S, S, C)`` of ``value``'s dtype.
    """
    out = np.full((*p.shape, value.shape[2]), pad, dtype=value.dtype)
    top, left, h, w = p.extent
    out[top : top + h, left : left + w] = resize_box(value, p.box, p.out)
    return out
