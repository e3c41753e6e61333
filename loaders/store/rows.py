"""Row plumbing of the fast path: where each row of a chunk goes, and copying it there once.

A *route* ``(dest, dest_rows, chunk_rows)`` sends rows ``chunk_rows`` (axis 0) of a chunk to
rows ``dest_rows`` of ``dest``, a C-contiguous array with rows of the same byte size (e.g. a
batch buffer); routes are checked. A *run* ``(dest, chunk_rows)`` is the checked, lean form the
batch reader builds itself: ``dest`` is exactly the destination rows, a C-contiguous
``(n, row bytes)`` uint8 array, and ``chunk_rows`` ``n`` indices in ``[0, chunk rows)``. A
batch-sorted epoch plan gives one run per (chunk, batch), so the copy of a run is one
``np.take`` and nothing per row or per route is checked again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

__all__ = [
    "Copy",
    "Route",
    "Run",
    "copy_after",
    "copy_rows",
    "flat_parts",
    "run_parts",
    "runs_of",
    "scatter",
    "take_runs",
]

Route = tuple[np.ndarray, Sequence[int], Sequence[int]]  # (dest, dest_rows, chunk_rows)
Run = tuple[np.ndarray, np.ndarray]  # (dest rows (n, row bytes) uint8, chunk rows (n,) intp)
Copy = tuple[memoryview, memoryview]  # (dest row, src row): a row read once, served twice


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


def run_parts(
    runs: Sequence[Run], rows: int, row_bytes: int
) -> tuple[list[memoryview], list[Copy]]:
    """Return one byte view per chunk row, in order, and the copies still to make after a read.

    A chunk row goes to its run's row, or to a row of scratch when no run asks for it; a row
    that several runs ask for (a sample drawn twice by weighted sampling) is read into the
    first and copied to the others after the read (the copies, ``(dest, src)`` byte views).
    Byte views are cheaper to make than numpy row views, which matters at one per row; the
    scratch rows are distinct, so the whole chunk still lands somewhere (for the checksum).
    """
    views: list[memoryview | None] = [None] * rows
    copies: list[Copy] = []
    for dest, frm in runs:
        flat = memoryview(dest).cast("B")  # type: ignore[arg-type]
        for d, c in enumerate(frm.tolist()):
            view = flat[d * row_bytes : (d + 1) * row_bytes]
            if views[c] is None:
                views[c] = view
            else:
                copies.append((view, views[c]))
    missing = [i for i, v in enumerate(views) if v is None]
    if missing:
        scratch = _scratch(len(missing) * row_bytes)
        for k, i in enumerate(missing):
            views[i] = scratch[k * row_bytes : (k + 1) * row_bytes]
    return views, copies  # type: ignore[return-value]


_SCRATCH = threading.local()


def _scratch(nbytes: int) -> memoryview:
    """``nbytes`` of this thread's scratch for rows no run asks for, reused chunk after chunk.

    A fresh buffer per chunk cost more than the read itself where a subset or weighted draws
    leave rows of most chunks unserved: zero-filled, then faulted in page by page as the read
    landed in it (weights= at 0.71x the plain loader's samples/s on a raw 256 px store, 8,192
    samples). A thread reads one chunk at a time and its scratch is only checksummed, so one
    buffer per thread, grown when a chunk needs more, serves every read.
    """
    buf: bytearray | None = getattr(_SCRATCH, "buf", None)
    if buf is None or len(buf) < nbytes:
        buf = bytearray(nbytes)
        _SCRATCH.buf = buf
    return memoryview(buf)[:nbytes]


def copy_after(copies: Sequence[Copy]) -> None:
    """Make the copies :func:`run_parts` left for rows asked for more than once."""
    for dest, src in copies:
        dest[:] = src


def runs_of(routes: Sequence[Route], rows: int, row_bytes: int) -> list[Run]:
    """Check ``routes`` against a chunk of ``rows`` rows of ``row_bytes`` bytes; return runs.

    A route whose destination rows are a ``range`` is one run; any other is one run per row.

    Raises:
        ValueError: A destination is not writeable C-contiguous, has rows of another size, or
            a row index is out of range.
    """
    runs: list[Run] = []
    for dest, dest_rows, chunk_rows in routes:
        dest2d = _rows2d(dest, row_bytes)
        frm = _indices(chunk_rows, rows)
        first = _run(dest_rows, len(frm), len(dest2d))
        if first is not None:
            runs.append((dest2d[first : first + len(frm)], frm))
            continue
        to = _indices(dest_rows, len(dest2d))
        if len(to) != len(frm):
            raise ValueError("route row index out of range")
        runs.extend((dest2d[d : d + 1], frm[k : k + 1]) for k, d in enumerate(to.tolist()))
    return runs


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

    Every index is range-checked first (:func:`runs_of`), then :func:`take_runs` copies.
    """
    if not src2d.flags.c_contiguous:
        raise ValueError("source rows must be C-contiguous")
    take_runs(src2d, runs_of(routes, *src2d.shape))


def take_runs(src2d: np.ndarray, runs: Sequence[Run]) -> None:
    """Copy each run's chunk rows of ``src2d`` (rows x bytes, uint8) into its rows: one take.

    ``"clip"`` lets numpy write straight into the destination (``"raise"`` would copy through
    a temporary): the runs' indices are in range by construction (:data:`Run`).
    """
    for dest, frm in runs:
        src2d.take(frm, 0, dest, "clip")
