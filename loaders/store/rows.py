"""Row plumbing of the fast path: where each row of a chunk goes, and copying it there once.

A *route* ``(dest, dest_rows, chunk_rows)`` sends rows ``chunk_rows`` (axis 0) of a chunk to
rows ``dest_rows`` of ``dest``, a C-contiguous array with rows of the same byte size (e.g. a
batch buffer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["Route", "copy_rows", "flat_parts", "row_parts", "scatter"]

Route = tuple[np.ndarray, Sequence[int], Sequence[int]]  # (dest, dest_rows, chunk_rows)


def flat_parts(parts: Sequence[np.ndarray | memoryview]) -> list[memoryview]:
    """Return ``parts`` (arrays or buffers) as flat byte views.

    Raises:
        ValueError: A part is read-only or not C-contiguous.
    """
    out = []
    for p in parts:
        view = memoryview(p)  # type: ignore[arg-type]
        if view.readonly or not view.c_contiguous:
            raise ValueError("every part must be a writeable C-contiguous array")
        out.append(view if view.ndim == 1 and view.format == "B" else view.cast("B"))
    return out


def scatter(src: np.ndarray, flats: list[memoryview]) -> None:
    """Copy ``src``'s bytes, in order, over the flat byte views ``flats``."""
    data = memoryview(np.ascontiguousarray(src)).cast("B")  # type: ignore[arg-type]
    pos = 0
    for flat in flats:
        flat[:] = data[pos : pos + flat.nbytes]
        pos += flat.nbytes


def row_parts(
    routes: Sequence[Route], chunk_shape: tuple[int, ...], dtype: np.dtype
) -> list[memoryview]:
    """Return one byte view per chunk row, in order: its routed row, or a row of scratch.

    Byte views are cheaper to make than numpy row views, which matters at one per row; the
    scratch rows are distinct, so the whole chunk still lands somewhere (for the checksum).
    """
    rows = chunk_shape[0]
    row_bytes = math.prod(chunk_shape[1:]) * np.dtype(dtype).itemsize
    views: list[memoryview | None] = [None] * rows
    for dest, dest_rows, chunk_rows in routes:
        dest2d = _rows2d(dest, row_bytes)
        frm = _indices(chunk_rows, rows)
        first = _run(dest_rows, len(frm), len(dest2d))
        to = (
            range(first, first + len(frm))
            if first is not None
            else _indices(dest_rows, len(dest2d)).tolist()
        )
        if len(to) != len(frm):
            raise ValueError("route row index out of range")
        flat = memoryview(dest2d).cast("B")  # type: ignore[arg-type]
        for d, c in zip(to, frm.tolist(), strict=True):
            views[c] = flat[d * row_bytes : (d + 1) * row_bytes]
    missing = [i for i, v in enumerate(views) if v is None]
    if missing:
        scratch = memoryview(bytearray(len(missing) * row_bytes))
        for k, i in enumerate(missing):
            views[i] = scratch[k * row_bytes : (k + 1) * row_bytes]
    return views  # type: ignore[return-value]


def _rows2d(dest: np.ndarray, row_bytes: int) -> np.ndarray:
    """Return ``dest`` as (rows, bytes), checking it can take rows of ``row_bytes``."""
    flags = dest.flags
    if not (flags.c_contiguous and flags.writeable):
        raise ValueError("route destinations must be writeable C-contiguous arrays")
    dest2d = (
        dest
        if dest.ndim == 2 and dest.dtype == np.uint8
        else (dest.reshape(len(dest), -1).view(np.uint8))
    )
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
        if first is not None:  # "clip" writes straight into out; the indices were checked above
            src2d.take(frm, 0, dest2d[first : first + len(frm)], "clip")
            continue
        to = _indices(dest_rows, len(dest2d))
        if len(to) != len(frm):
            raise ValueError("route row index out of range")
        dest2d[to] = src2d[frm]
