"""Row plumbing of the fast path: where each row of a chunk goes, and copying it there once.

A *route* ``(dest, dest_rows, chunk_rows)`` sends rows ``chunk_rows`` (axis 0) of a chunk to
rows ``dest_rows`` of ``dest``, a C-contiguous array with rows of the same byte size (e.g. a
batch buffer).
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c
import numpy as np

__all__ = ["Route", "copy_rows", "flat_parts", "row_parts", "scatter"]

Route = tuple[np.ndarray, np.ndarray, np.ndarray]  # (dest, dest_rows, chunk_rows)


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
        for d, c in zip(dest_rows.tolist(), chunk_rows.tolist(), strict=True):
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


def copy_rows(src2d: np.ndarray, routes: Sequence[Route], check: bool) -> int | None:
    """Copy the routed rows of ``src2d`` (rows x bytes), each once.

    Returns:
        The crc32c of all rows in order when ``check`` (each row is checksummed right after
        its copy, while it is still in the CPU cache), else None.
    """
    dest_of = _dest_rows(routes, len(src2d), (-1,))
    crc = 0
    for row, dest in zip(src2d, dest_of, strict=True):
        if dest is not None:
            dest.view(np.uint8)[...] = row
        if check:
            crc = crc32c.crc32c(row, crc)
    return crc if check else None
