"""Row plumbing of the fast path: where each row of a chunk goes, and copying it there once.

A *route* ``(dest, dest_rows, chunk_rows)`` sends rows ``chunk_rows`` (axis 0) of a chunk to
rows ``dest_rows`` of ``dest``, a C-contiguous array with rows of the same byte size (e.g. a
batch buffer).
"""

from __future__ import annotations

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
    flags = dest.flags
    if not (flags.c_contiguous and flags.writeable):
        raise ValueError("route destinations must be writeable C-contiguous arrays")
    dest2d = dest if dest.ndim == 2 and dest.dtype == np.uint8 else (
        dest.reshape(len(dest), -1).view(np.uint8))
    if dest2d.shape[1] != row_bytes:
        raise ValueError(f"route rows of {dest2d.shape[1]} bytes, chunk rows of {row_bytes}")
    return dest2d


def _indices(values: Sequence[int], stop: int) -> np.ndarray:
    """Return ``values`` as a 1-D index array, checking every index is in ``[0, stop)``."""
    idx = np.asarray(values, np.intp).reshape(-1)
    if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= stop):
        raise ValueError("route row index out of range")
    return idx


def _run(dest_rows: Sequence[int], n: int, stop: int) -> int | None:
    """Return the first row when ``dest_rows`` is a ``range`` run of ``n`` rows; else None."""
    if not (isinstance(dest_rows, range) and dest_rows.step == 1):
        return None
    if len(dest_rows) != n or dest_rows.start < 0 or dest_rows.stop > stop:
        raise ValueError("route row index out of range")
    return dest_rows.start


def copy_rows(src2d: np.ndarray, routes: Sequence[Route]) -> None:
    """Copy the routed rows of ``src2d`` (C-contiguous rows x bytes, uint8), each once.

    A route whose destination rows are a ``range`` (one run, what a batch-sorted epoch order
    gives) is one ``np.take`` straight into that slice: one copy, the GIL released. Other
    routes are fancy-indexed assignments (through a small temporary). Every index is
    range-checked first.
    """
    if not src2d.flags.c_contiguous:
        raise ValueError("source rows must be C-contiguous")
    rows, row_bytes = src2d.shape
    for dest, dest_rows, chunk_rows in routes:
        dest2d = _rows2d(dest, row_bytes)
        frm = _indices(chunk_rows, rows)
        first = _run(dest_rows, len(frm), len(dest2d))
        if first is not None:
            src2d.take(frm, 0, dest2d[first:first + len(frm)], "clip")
            continue
        to = _indices(dest_rows, len(dest2d))
        if len(to) != len(frm):
            raise ValueError("route row index out of range")
        dest2d[to] = src2d[frm]
