"""Parse and cache shard indexes: where each inner chunk sits in its shard file.

The index is the last ``N * 16 + 4`` bytes of a shard file: ``N x (offset u64, nbytes u64)``
little endian in C order over the shard's chunk grid, then their crc32c. A chunk that was never
written has offset = nbytes = 2^64-1; a shard file that does not exist holds only such chunks.
"""

from __future__ import annotations

import math
import os
import threading

import crc32c
import numpy as np

from loaders.errors import CorruptChunkError
from loaders.zarrmeta import ArrayMeta

__all__ = ["CRC_BYTES", "MISSING", "ShardIndexCache"]

MISSING = 2**64 - 1  # offset and nbytes of an inner chunk that was never written
CRC_BYTES = 4


class ShardIndexCache:
    """Thread-safe cache of the parsed indexes of one array's shard files."""

    def __init__(self, meta: ArrayMeta, name: str) -> None:
        self.meta, self.name = meta, name
        self._indexes: dict[tuple[int, ...], np.ndarray | None] = {}
        self._lock = threading.Lock()

    def locate(self, chunk: tuple[int, ...], path: str) -> tuple[int, int]:
        """Return ``(offset, nbytes)`` of ``chunk`` in ``path``; MISSING twice if never written.

        Raises:
            CorruptChunkError: The index fails its checksum, or the chunk's size is wrong.
        """
        index = self._index(chunk, path)
        if index is None:
            return MISSING, MISSING
        local = tuple(c % n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        offset, nbytes = (int(v) for v in index[local])
        want = self.meta.chunk_nbytes + CRC_BYTES
        if (offset, nbytes) != (MISSING, MISSING) and nbytes != want:
            raise CorruptChunkError(self.name, path, chunk, f"holds {nbytes} bytes, want {want}")
        return offset, nbytes

    def _index(self, chunk: tuple[int, ...], path: str) -> np.ndarray | None:
        key = tuple(c // n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        with self._lock:
            if key in self._indexes:
                return self._indexes[key]
        index = self._read(chunk, path)
        with self._lock:
            self._indexes[key] = index
        return index

    def _read(self, chunk: tuple[int, ...], path: str) -> np.ndarray | None:
        per_shard = self.meta.chunks_per_shard
        size = math.prod(per_shard) * 16 + CRC_BYTES
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # never-written shard: every chunk is the fill value
        try:
            file_size = os.fstat(fd).st_size
            if file_size < size:
                raise CorruptChunkError(self.name, path, chunk,
                                        f"shard file of {file_size} bytes is shorter than its "
                                        f"index ({size} bytes)")
            raw = os.pread(fd, size, file_size - size)
        finally:
            os.close(fd)
        body, tail = raw[:-CRC_BYTES], raw[-CRC_BYTES:]
        if len(raw) != size or crc32c.crc32c(body) != int.from_bytes(tail, "little"):
            raise CorruptChunkError(self.name, path, chunk, "shard index crc32c checksum mismatch")
        return np.frombuffer(body, "<u8").reshape(*per_shard, 2)
