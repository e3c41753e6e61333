"""Raw shard-file access for the fast path: ``preadv`` into caller buffers, or cached mmaps.

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

__all__ = ["MapCache", "preadv_all"]

_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 1024


def preadv_all(path: str, buffers: Sequence[np.ndarray | memoryview], offset: int) -> int:
    """``preadv`` flat byte ``buffers`` from ``path`` at ``offset``; return bytes read.

    At most IOV_MAX buffers go to one call; a short read stops early (the caller reports it).
    """
    views = [memoryview(b) for b in buffers]  # type: ignore[arg-type]
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for first in range(0, len(views), _IOV_MAX):
            group = views[first:first + _IOV_MAX]
            got = os.preadv(fd, group, offset + total)
            total += got
            if got != sum(v.nbytes for v in group):
                break
    finally:
        os.close(fd)
    return total


class MapCache:
    """Read-only mappings of whole files, least recently used dropped beyond ``budget`` bytes.

    A dropped mapping is unmapped once no numpy view of it is left (never under a reader).
    """

    def __init__(self, budget: int = 256 << 20) -> None:
        if budget < 0:
            raise ValueError(f"map budget must be >= 0 bytes, got {budget}")
        self.budget = budget
        self._maps: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str) -> np.ndarray:
        """Return the whole file ``path`` as a read-only uint8 array backed by a mapping."""
        with self._lock:
            arr = self._maps.get(path)
            if arr is not None:
                self._maps.move_to_end(path)
                return arr
        arr = self._map(path)
        with self._lock:
            if path not in self._maps:
                self._maps[path] = arr
                self._bytes += arr.nbytes
            while self._bytes > self.budget and len(self._maps) > 1:
                _, old = self._maps.popitem(last=False)
                self._bytes -= old.nbytes
            return self._maps.get(path, arr)

    @staticmethod
    def _map(path: str) -> np.ndarray:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return np.zeros(0, np.uint8)
            mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        return np.frombuffer(mapped, np.uint8)

    def clear(self) -> None:
        """Drop every mapping (each is unmapped once no array still views it)."""
        with self._lock:
            self._maps.clear()
            self._bytes = 0

    @property
    def mapped_bytes(self) -> int:
        """Bytes currently kept mapped."""
        return self._bytes
