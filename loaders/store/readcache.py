"""A bounded read-through cache of object-store chunks on local disk (least recently used out).

Each entry is one inner chunk exactly as stored (raw bytes + crc32c), in a file named by a hash
of (object URL, its ETag, offset, length): a rebuilt store (another ETag) never hits an old
entry, and the reader checks the crc32c of cached bytes as of a local store's (once per version
of the entry's file, or on every read with ``verify="always"``). Entries are files of the local
byte store (:class:`~precompute.storage.local.LocalStore`): written whole by a rename, read by
``preadv`` straight into the batch rows (:meth:`ReadCache.read_into`). Beyond ``max_bytes`` the
least recently used entries are deleted; a cache folder left by an earlier run is adopted (oldest
modification time first).

Several processes may share a folder (e.g. the ranks of a node): each counts the entries it
knows, so the folder can hold up to one budget per process; an entry another process evicted is
a miss, never an error.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loaders.errors import LoaderError
from precompute.checks import check_integer
from precompute.storage.base import Stamp
from precompute.storage.local import LocalStore
from precompute.storage.localio import MapCache

__all__ = ["ReadCache"]


class ReadCache:
    """Chunks on local disk, at most ``max_bytes`` of them (per process); thread-safe.

    Args:
        folder: Where entries live (created if missing).
        max_bytes: Byte budget; least recently used entries beyond it are deleted.

    Raises:
        LoaderError: ``max_bytes`` is negative or ``folder`` cannot be created.
    """

    def __init__(self, folder: str | Path, max_bytes: int) -> None:
        max_bytes = check_integer("cache_bytes", max_bytes, 0, None, LoaderError)
        self.folder, self.max_bytes = Path(folder), max_bytes
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LoaderError(f"cache folder {self.folder}: cannot create it ({exc})") from exc
        self._files = LocalStore()
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, int] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0
        self._adopt()

    @staticmethod
    def key(url: str, etag: str, offset: int, nbytes: int) -> str:
        """Return the entry name of ``nbytes`` at ``offset`` of version ``etag`` of ``url``."""
        return hashlib.sha256(f"{url}\0{etag}\0{offset}\0{nbytes}".encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / key

    def _adopt(self) -> None:
        found = []
        for path in self.folder.glob("??/*"):
            if path.name.startswith(".") or path.name.endswith(".partial"):  # a killed writer's
                path.unlink(missing_ok=True)
                continue
            st = path.stat()
            found.append((st.st_mtime_ns, path.name, st.st_size))
        for _, key, size in sorted(found):
            self._entries[key] = size
            self._bytes += size
        self._evict()

    def _hit(self, key: str) -> None:
        with self._lock:
            self.hits += 1
            if key in self._entries:
                self._entries.move_to_end(key)

    def _miss(self, key: str) -> None:
        with self._lock:
            self.misses += 1
            if key in self._entries:  # evicted by another process
                self._bytes -= self._entries.pop(key)

    def get(self, key: str) -> bytes | None:
        """Return the entry's bytes, or None (a miss)."""
        try:
            data = bytes(self._files.get(str(self._path(key))).data)
        except OSError:
            self._miss(key)
            return None
        self._hit(key)
        return data

    def read_into(self, key: str, buffers: Sequence[Any]) -> tuple[int, Stamp] | None:
        """Read the entry straight into ``buffers``: ``(bytes read, its file's stamp)``, or None.

        The stamp is the entry file's version (taken before the read), for a checksum once per
        version of it.
        """
        path = str(self._path(key))
        try:
            stamp = self._files.stamp(path)
            got = self._files.read_into(path, buffers, 0)
        except OSError:
            self._miss(key)
            return None
        self._hit(key)
        return got, stamp

    def mapped(self, key: str, maps: MapCache) -> tuple[np.ndarray, Stamp] | None:
        """The entry as a read-only array backed by a mapping kept in ``maps``, or None.

        With its file's stamp (taken now: a mapping of an older version of the file is
        replaced). A file evicted while mapped stays readable through its mapping.
        """
        path = str(self._path(key))
        try:
            found = maps.get(path, self._files.stamp(path))
        except OSError:
            self._miss(key)
            return None
        self._hit(key)
        return found

    def put(self, key: str, data: bytes | Sequence[Any]) -> None:
        """Store ``data`` (bytes, or buffers in order) as entry ``key``; evict beyond the budget."""
        parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else list(data)
        size = sum(memoryview(p).nbytes for p in parts)
        if size > self.max_bytes:
            return
        self._files.put(str(self._path(key)), parts)
        with self._lock:
            self._bytes += size - self._entries.pop(key, 0)
            self._entries[key] = size
            self._evict()

    def discard(self, key: str) -> None:
        """Delete entry ``key`` (e.g. its bytes failed their checksum)."""
        self._path(key).unlink(missing_ok=True)
        with self._lock:
            self._bytes -= self._entries.pop(key, 0)

    def _evict(self) -> None:
        """Delete least recently used entries beyond the budget (lock held)."""
        while self._bytes > self.max_bytes and self._entries:
            key, size = self._entries.popitem(last=False)
            self._bytes -= size
            self._path(key).unlink(missing_ok=True)

    @property
    def cached_bytes(self) -> int:
        """Bytes of the entries this process knows."""
        return self._bytes
