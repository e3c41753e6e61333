"""The crc32c check of whole inner chunks, once per version of their shard file or always.

Each inner chunk of the fast path is its raw bytes followed by their crc32c (little endian).
:class:`ChunkChecker` checks it, remembering per chunk the :data:`~loaders.store.rawio.Stamp` of the
file version it checked, so ``verify="first"`` costs one checksum per chunk per file version.
"""

from __future__ import annotations

import threading

import crc32c
import numpy as np

from loaders.errors import CorruptChunkError
from loaders.store.rawio import Stamp
from loaders.store.shardindex import CRC_BYTES

__all__ = ["ChunkChecker"]

_UNSEEN = object()  # no check recorded for a chunk yet


class ChunkChecker:
    """Checks chunk checksums of one array; thread-safe.

    Args:
        name: Array name used in error messages.
        verify: ``first`` (once per chunk and file version) or ``always``.
    """

    def __init__(self, name: str, verify: str) -> None:
        self.name, self.verify = name, verify
        self._verified: dict[tuple[int, ...], Stamp | None] = {}  # chunk -> its file's stamp
        self._lock = threading.Lock()

    def check(
        self,
        chunk: tuple[int, ...],
        path: str,
        data: list[np.ndarray] | list[memoryview],
        stored: int,
        stamp: Stamp | None,
    ) -> None:
        """Check the crc32c of ``data`` against ``stored``, if due for this file version.

        ``stamp`` is the version the data was read from (taken before the read): with
        ``verify="first"`` a chunk is checked once per version of its shard file.

        Raises:
            CorruptChunkError: The checksum does not match.
        """
        if not self.due(chunk, stamp):
            return
        crc = 0
        for part in data:
            crc = crc32c.crc32c(part, crc)  # type: ignore[arg-type]
        if crc != stored:
            raise CorruptChunkError(self.name, path, chunk, "crc32c checksum mismatch")
        if self.verify == "first":
            with self._lock:
                self._verified[chunk] = stamp

    def check_mapped(
        self, chunk: tuple[int, ...], path: str, src: np.ndarray, stamp: Stamp
    ) -> None:
        """Check a mapped chunk (bytes + crc32c) of version ``stamp`` of shard file ``path``."""
        if self.due(chunk, stamp):
            stored = int.from_bytes(src[-CRC_BYTES:].tobytes(), "little")
            self.check(chunk, path, [src[:-CRC_BYTES]], stored, stamp)

    def due(self, chunk: tuple[int, ...], stamp: Stamp | None) -> bool:
        """Return whether ``chunk`` of file version ``stamp`` is to be checked now."""
        if self.verify != "first":
            return True
        seen = self._verified.get(chunk, _UNSEEN)
        return seen is _UNSEEN or seen != stamp
