"""Row plumbing of the fast path: where each row of a chunk goes, and copying it there once.

A *route* ``(dest, dest_rows, chunk_rows)`` sends rows ``chunk_rows`` (axis 0) of a chunk to
rows ``dest_rows`` of ``dest``, a C-contiguous array with rows of the same byte size (e.g. a
batch buffer).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

__all__ = ["Route", "copy_rows", "flat_parts", "row_parts", "scatter"]

Route = tuple[np.ndarray, Sequence[int], Sequence[int]]  # (dest, dest_rows, chunk_rows)


def _ints(values: Sequence[int]) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def flat_parts(parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Return ``parts`` as flat uint8 views (each must be writeable and C-contiguous)."""
    for p in parts:
        if not (p.flags.c_contiguous and p.flags.writeable):
            raise ValueError("every part must be a writeable C-contiguous array")
    return [p.reshape(-1).view(np.uint8) for p in parts]


def scatter(src: np.ndarray, flats: list[np.ndarray]) -> None:
    """Copy ``src``'s bytes, in order, over the flat uint8 ``flats``."""
    src = src.reshape(-1).view(np.uint8)
    pos = 0
    for flat in flats:
        flat[...] = src[pos:pos + flat.nbytes]
        pos += flat.nbytes


def _dest_rows(routes: Sequence[Route], rows: int, row_shape: tuple[int, ...]
               ) -> list[np.ndarray | None]:
    dest_of: list[np.ndarray | None] = [None] * rows
    for dest, dest_rows, chunk_rows in routes:
        shaped = dest.reshape(len(dest), *row_shape)
        for d, c in zip(_ints(dest_rows), _ints(chunk_rows), strict=True):
            dest_of[c] = shaped[d]
    return dest_of


def row_parts(routes: Sequence[Route], chunk_shape: tuple[int, ...], dtype: np.dtype
              ) -> list[np.ndarray]:
    """Return one destination per chunk row: its routed row, or a row of fresh scratch."""
    parts = _dest_rows(routes, chunk_shape[0], chunk_shape[1:])
    missing = [i for i, p in enumerate(parts) if p is None]
    scratch = np.empty((len(missing), *chunk_shape[1:]), dtype)
    for i, row in zip(missing, scratch, strict=True):
        parts[i] = row
    return [p for p in parts if p is not None]


def _rows2d(dest: np.ndarray, row_bytes: int) -> np.ndarray:
    """Return ``dest`` as (rows, bytes), checking it can take rows of ``row_bytes``."""
    if not dest.flags.c_contiguous or not dest.flags.writeable:
        raise ValueError("route destinations must be writeable C-contiguous arrays")
    dest2d = dest.reshape(len(dest), -1).view(np.uint8)
    if dest2d.shape[1] != row_bytes:
        raise ValueError(f"route rows of {dest2d.shape[1]} bytes, chunk rows of {row_bytes}")
    return dest2d


def _in_range(values: list[int], stop: int) -> bool:
    return not values or (min(values) >= 0 and max(values) < stop)


def copy_rows(src2d: np.ndarray, routes: Sequence[Route]) -> None:
    """Copy the routed rows of ``src2d`` (C-contiguous rows x bytes, uint8), each once.

    One ``memmove`` per row (it releases the GIL, and skips numpy's per-call overhead, which
    costs as much as the copy of a small row); every index is range-checked first.
    """
    if not src2d.flags.c_contiguous:
        raise ValueError("source rows must be C-contiguous")
    rows, row_bytes = src2d.shape
    src = src2d.ctypes.data
    for dest, dest_rows, chunk_rows in routes:
        dest2d = _rows2d(dest, row_bytes)
        to, frm = _ints(dest_rows), _ints(chunk_rows)
        if len(to) != len(frm) or not (_in_range(to, len(dest2d)) and _in_range(frm, rows)):
            raise ValueError("route row index out of range")
        base = dest2d.ctypes.data
        for d, c in zip(to, frm, strict=True):
            ctypes.memmove(base + d * row_bytes, src + c * row_bytes, row_bytes)
