"""Parse and cache shard indexes: where each inner chunk sits in its shard file.

The index is the last ``N * 16 + 4`` bytes of a shard file: ``N x (offset u64, nbytes u64)``
little endian in C order over the shard's chunk grid, then their crc32c. A chunk that was never
written has offset = nbytes = 2^64-1; for a generic array a shard file that does not exist holds
only such chunks. In a complete nostall store (``complete=True``) every shard file and every
inner chunk inside the array exists at its exact size (``docs/FORMAT.md``), so a missing file,
a missing chunk or a file of another size is corruption, never the fill value.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable

import numpy as np

from loaders.errors import CorruptChunkError
from loaders.store.rawio import Stamp, file_stamp
from loaders.store.zarrmeta import ArrayMeta
from precompute.format.shardcodec import CRC_BYTES, MISSING, decode_index, index_nbytes
from precompute.format.storecheck import sharded_file_size

__all__ = ["CRC_BYTES", "MISSING", "ShardIndexCache"]


TailReader = Callable[[str, int], tuple[bytes, int, Stamp]]


def _local_tail(path: str, nbytes: int) -> tuple[bytes, int, Stamp]:
    """Return the last ``nbytes`` of file ``path`` (b"" if it is shorter), its size, its stamp."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        raw = os.pread(fd, nbytes, st.st_size - nbytes) if st.st_size >= nbytes else b""
    finally:
        os.close(fd)
    return raw, st.st_size, file_stamp(st)


class ShardIndexCache:
    """Thread-safe cache of the parsed indexes of one array's shard files.

    Args:
        meta: The array's metadata.
        name: Name used in error messages.
        complete: The array belongs to a complete store: a missing shard file or inner chunk,
            or a shard file of another size than its index and chunks give, is corruption.
        tail: Reads the last ``n`` bytes of a shard: ``tail(path, n) -> (bytes, file size,
            stamp)``, FileNotFoundError if it is missing; default the local file (a
            :class:`~loaders.store.shardio.ShardedArrayReader` reads through its store).
    """

    def __init__(
        self, meta: ArrayMeta, name: str, complete: bool = False, tail: TailReader | None = None
    ) -> None:
        self.meta, self.name, self.complete, self.tail = meta, name, complete, tail
        self._indexes: dict[tuple[int, ...], tuple[Stamp | None, np.ndarray | None]] = {}
        self._located: dict[tuple[int, ...], tuple[Stamp, int, int]] = {}
        self._lock = threading.Lock()

    def locate(
        self, chunk: tuple[int, ...], path: str, stamp: Stamp | None = None
    ) -> tuple[int, int]:
        """Return ``(offset, nbytes)`` of ``chunk`` in ``path``; MISSING twice if never written.

        Args:
            chunk: Inner chunk coordinates.
            path: Its shard file.
            stamp: The file's stamp now, if known: an index cached for another version of the
                file is read again.

        Raises:
            CorruptChunkError: The index fails its checksum, points outside the file, the
                chunk's size is wrong, or (``complete``) the file or the chunk is missing.
        """
        if stamp is not None:
            memo = self._located.get(chunk)
            if memo is not None and memo[0] == stamp:
                return memo[1], memo[2]
        index = self._index(chunk, path, stamp)
        if index is None:
            return MISSING, MISSING
        local = tuple(c % n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        offset, nbytes = (int(v) for v in index[local])
        if (offset, nbytes) == (MISSING, MISSING):
            if self.complete:
                raise CorruptChunkError(
                    self.name,
                    path,
                    chunk,
                    "chunk is missing from the shard index (a complete store has every chunk)",
                )
            return offset, nbytes
        want = self.meta.chunk_nbytes + CRC_BYTES
        if nbytes != want and (self.meta.codec is None or nbytes <= CRC_BYTES):
            raise CorruptChunkError(self.name, path, chunk, f"holds {nbytes} bytes, want {want}")
        if stamp is not None:  # this file version's answer, until the file changes
            self._located[chunk] = (stamp, offset, nbytes)
        return offset, nbytes

    def _index(self, chunk: tuple[int, ...], path: str, stamp: Stamp | None) -> np.ndarray | None:
        key = tuple(c // n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        with self._lock:
            cached = self._indexes.get(key)
        if cached is not None and (stamp is None or cached[0] is None or cached[0] == stamp):
            return cached[1]
        entry = self._read(chunk, path, key)
        with self._lock:
            self._indexes[key] = entry
        return entry[1]

    def _read(
        self, chunk: tuple[int, ...], path: str, key: tuple[int, ...]
    ) -> tuple[Stamp | None, np.ndarray | None]:
        per_shard = self.meta.chunks_per_shard
        size = index_nbytes(math.prod(per_shard))
        try:
            raw, file_size, stamp = (self.tail or _local_tail)(path, size)
        except FileNotFoundError:
            if self.complete:
                raise CorruptChunkError(
                    self.name,
                    path,
                    chunk,
                    "shard file is missing (a complete store has every shard)",
                ) from None
            return None, None  # never-written shard: every chunk is the fill value
        if file_size < size:
            raise CorruptChunkError(
                self.name,
                path,
                chunk,
                f"shard file of {file_size} bytes is shorter than its index ({size} bytes)",
            )
        self._check_size(chunk, path, key, file_size)
        try:
            index = decode_index(raw, per_shard)
        except ValueError as exc:
            raise CorruptChunkError(self.name, path, chunk, str(exc)) from None
        written = index[..., 0] != MISSING
        ends = index[..., 0][written] + index[..., 1][written]  # u8: no overflow of real values
        if written.any() and (
            int(ends.max()) > file_size - size or bool((ends < index[..., 0][written]).any())
        ):
            raise CorruptChunkError(
                self.name,
                path,
                chunk,
                f"shard index points past the data of a {file_size}-byte file",
            )
        return stamp, index

    def _check_size(
        self, chunk: tuple[int, ...], path: str, key: tuple[int, ...], file_size: int
    ) -> None:
        """Complete fast-path arrays: the file must have the size its chunks and index give."""
        m = self.meta
        if not (self.complete and m.fast) or m.codec is not None:  # coded: sizes vary
            return
        want = sharded_file_size(m.shape, m.shard_shape, m.chunk_shape, m.dtype.itemsize, key)
        if file_size != want:
            raise CorruptChunkError(
                self.name,
                path,
                chunk,
                f"shard file has {file_size} bytes, a complete shard has {want} (cut or replaced)",
            )
