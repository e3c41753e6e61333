"""Raw file access of the local store: ``preadv`` into caller buffers, or cached mmaps.

``pread`` copies from the page cache through the kernel (bounded memory, works everywhere);
``mmap`` keeps shard files mapped so a hot page cache is read at memcpy speed, like a numpy
memmap. Mapped file pages count in the process RSS, so :class:`MapCache` unmaps the least
recently used shard files beyond a byte budget: RSS stays bounded by the budget, not by the
store size.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from precompute.storage.base import Stamp  # (inode, size, mtime in ns): one version of a file

__all__ = ["MAP_BYTES", "MapCache", "Stamp", "file_stamp", "preadv_all", "preadv_fd", "writev_all"]

MAP_BYTES = 512 << 20  # default budget of mapped shard-file bytes (io="mmap" and "auto")


def file_stamp(st: os.stat_result) -> Stamp:
    """Return the :data:`Stamp` of a ``stat`` result."""
    return st.st_ino, st.st_size, st.st_mtime_ns


_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 1024


def preadv_all(path: str, buffers: Sequence[np.ndarray | memoryview], offset: int) -> int:
    """``preadv`` flat byte ``buffers`` from ``path`` at ``offset``; return bytes read.

    At most IOV_MAX buffers go to one call; a short read stops early (the caller reports it).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        return preadv_fd(fd, buffers, offset)
    finally:
        os.close(fd)


def preadv_fd(fd: int, buffers: Sequence[np.ndarray | memoryview], offset: int) -> int:
    """:func:`preadv_all` from an open file descriptor."""
    views = [memoryview(b) for b in buffers]  # type: ignore[arg-type]
    total = 0
    for first in range(0, len(views), _IOV_MAX):
        group = views[first : first + _IOV_MAX]
        got = os.preadv(fd, group, offset + total)
        total += got
        if got != sum(v.nbytes for v in group):
            break
    return total


def writev_all(fd: int, parts: Sequence[bytes | bytearray | memoryview | np.ndarray]) -> None:
    """``writev`` every part to ``fd`` in order, resuming after short writes."""
    views = [v for v in (memoryview(p).cast("B") for p in parts) if v.nbytes]  # type: ignore[arg-type]
    while views:
        done = os.writev(fd, views[:_IOV_MAX])
        while done and views:
            if done >= views[0].nbytes:
                done -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][done:]
                done = 0


class MapCache:
    """Read-only mappings of whole files, least recently used dropped beyond ``budget`` bytes.

    A dropped mapping is unmapped once no numpy view of it is left (never under a reader).
    Each mapping remembers the :data:`Stamp` of the file it maps. :attr:`drops` counts the
    mappings dropped or replaced so far: a reader that keeps views of mapped chunks drops them
    when it changes, so the views never keep an unmapped file alive for long.
    """

    def __init__(self, budget: int = MAP_BYTES) -> None:
        if budget < 0:
            raise ValueError(f"map budget must be >= 0 bytes, got {budget}")
        self.budget = budget
        self._maps: OrderedDict[str, tuple[np.ndarray, Stamp]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.drops = 0

    def get(self, path: str, current: Stamp | None = None) -> tuple[np.ndarray, Stamp]:
        """Return the whole file ``path`` as a read-only uint8 array backed by a mapping.

        Args:
            path: The file.
            current: The file's stamp now, if known: a mapping of another version of the
                file (replaced or rewritten since it was mapped) is dropped and the file
                mapped again.

        Returns:
            The array and the stamp of the file version it maps.
        """
        with self._lock:
            entry = self._maps.get(path)
            if entry is not None and (current is None or entry[1] == current):
                self._maps.move_to_end(path)
                return entry
        entry = self._map(path)
        with self._lock:
            old = self._maps.pop(path, None)
            if old is not None:
                self._bytes -= old[0].nbytes
                self.drops += 1
            self._maps[path] = entry
            self._bytes += entry[0].nbytes
            while self._bytes > self.budget and len(self._maps) > 1:
                _, (dropped, _) = self._maps.popitem(last=False)
                self._bytes -= dropped.nbytes
                self.drops += 1
            return entry

    @staticmethod
    def _map(path: str) -> tuple[np.ndarray, Stamp]:
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if st.st_size == 0:
                return np.zeros(0, np.uint8), file_stamp(st)
            mapped = mmap.mmap(fd, st.st_size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        return np.frombuffer(mapped, np.uint8), file_stamp(st)

    def touch(self, path: str) -> None:
        """Mark ``path``'s mapping as just used (a read that went by a view kept of it)."""
        with self._lock:
            if path in self._maps:
                self._maps.move_to_end(path)

    def clear(self) -> None:
        """Drop every mapping (each is unmapped once no array still views it)."""
        with self._lock:
            self.drops += 1
            self._maps.clear()
            self._bytes = 0

    @property
    def paths(self) -> tuple[str, ...]:
        """The files kept mapped, least recently used first."""
        with self._lock:
            return tuple(self._maps)

    @property
    def mapped_bytes(self) -> int:
        """Bytes currently kept mapped."""
        return self._bytes
