"""Decode coded inner chunks (zstd, jpeg) on the reader threads, straight into their rows.

A coded chunk (:mod:`precompute.format.codecs`) is read as stored, its crc32c checked over
those bytes on every read (so a damaged chunk is a checksum error, never wrong values), then
decoded here: for the runs of a batch read (:data:`loaders.store.rows.Run`) each asked row is
decoded once into its first destination and copied to any other (a codec that stores rows
apart, ``jpeg``, decodes only the asked rows; rows no one asked for cost nothing); for whole
chunks (arrays read at open) into scratch, then scattered. The codecs' C code (numcodecs'
zstd, libjpeg-turbo through simplejpeg) runs with the GIL released, so the loader's read
threads decode in parallel. Scratch chunks are kept per thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from loaders.store.rows import Run, scatter
from loaders.store.zarrmeta import ArrayMeta

__all__ = ["STREAM_HEAD", "decode_flats", "decode_runs", "pack_runs"]

_local = threading.local()


def _scratch(meta: ArrayMeta) -> np.ndarray:
    """A chunk-shaped buffer of ``meta``'s dtype, reused by this thread."""
    key = (meta.chunk_shape, meta.dtype.str)
    kept: dict[Any, np.ndarray] = getattr(_local, "chunks", None) or {}
    _local.chunks = kept
    if key not in kept:
        if len(kept) > 8:
            kept.clear()
        kept[key] = np.empty(meta.chunk_shape, meta.dtype)
    return kept[key]


def decode_runs(meta: ArrayMeta, data: Any, runs: Sequence[Run]) -> None:
    """Decode the rows ``runs`` ask for of a chunk's stored bytes ``data`` (crc32c removed).

    Raises:
        ValueError: The bytes do not decode to a chunk of the array's shape.
    """
    row_shape = meta.chunk_shape[1:]
    first: list[np.ndarray | None] = [None] * meta.chunk_shape[0]
    copies: list[tuple[np.ndarray, int]] = []
    for dest, frm in runs:
        for d, c in enumerate(frm.tolist()):
            row = dest[d].view(meta.dtype).reshape(row_shape)
            if first[c] is None:
                first[c] = row
            else:
                copies.append((row, c))
    codec = meta.codec
    codec.codec.decode_rows(data, first, _scratch(meta), codec.options, meta.fill_value)
    for row, c in copies:
        row[...] = first[c]


def decode_flats(meta: ArrayMeta, data: Any, flats: list[memoryview]) -> None:
    """Decode a whole chunk's stored bytes ``data`` over the byte views ``flats``, in order.

    Raises:
        ValueError: The bytes do not decode to a chunk of the array's shape.
    """
    chunk = _scratch(meta)
    meta.codec.codec.decode_into(data, chunk, meta.codec.options, meta.fill_value)
    scatter(chunk, flats)


STREAM_HEAD = 4  # a packed row: u32 little-endian stream length, then the stream


def pack_runs(meta: ArrayMeta, data: Any, runs: Sequence[Run]) -> None:
    """Copy each asked row's JPEG stream into its destination row, undecoded (device decode).

    A packed row holds the stream's length (u32 little endian; 0: an image of fill values)
    and the stream; :func:`loaders.transfer.devicedecode.unpack` reads it back. Only for a
    codec that stores rows apart (``jpeg``), one image per row.

    Raises:
        ValueError: A stream is larger than its raw row (then decode on the CPU).
    """
    from precompute.format.codecs.jpeg import split_streams

    streams = split_streams(data, meta.chunk_shape[0])
    for dest, frm in runs:
        for d, c in enumerate(frm.tolist()):
            stream = streams[c]
            if STREAM_HEAD + len(stream) > dest.shape[1]:
                raise ValueError(
                    f"a JPEG stream of {len(stream)} bytes does not fit its raw row of "
                    f"{dest.shape[1]} bytes: decode it on the CPU (jpeg_decoder='reader')"
                )
            row = dest[d]
            row[:STREAM_HEAD] = np.frombuffer(len(stream).to_bytes(4, "little"), np.uint8)
            row[STREAM_HEAD : STREAM_HEAD + len(stream)] = np.frombuffer(stream, np.uint8)
