"""A bounded read-through cache of object-store chunks on local disk (least recently used out).

Each entry is one inner chunk exactly as stored (raw bytes + crc32c), in a file named by a hash
of (object URL, its ETag, offset, length): a rebuilt store (another ETag) never hits an old
entry, and the reader checks the crc32c of cached bytes as of fetched ones. Entries are written
atomically (temporary file + rename). Beyond ``max_bytes`` the least recently used entries are
deleted; a cache folder left by an earlier run is adopted (oldest modification time first).

Several processes may share a folder (e.g. the ranks of a node): each counts the entries it
knows, so the folder can hold up to one budget per process; an entry another process evicted is
a miss, never an error.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from loaders.errors import LoaderError
from precompute.checks import check_integer

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
            if path.name.startswith("."):  # a temporary file of a killed writer
                path.unlink(missing_ok=True)
                continue
            st = path.stat()
            found.append((st.st_mtime_ns, path.name, st.st_size))
        for _, key, size in sorted(found):
            self._entries[key] = size
            self._bytes += size
        self._evict()

    def get(self, key: str) -> bytes | None:
        """Return the entry's bytes, or None (a miss)."""
        try:
            data = self._path(key).read_bytes()
        except OSError:
            with self._lock:
                self.misses += 1
                if key in self._entries:  # evicted by another process
                    self._bytes -= self._entries.pop(key)
            return None
        with self._lock:
            self.hits += 1
            if key in self._entries:
                self._entries.move_to_end(key)
        return data

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` as entry ``key`` (atomically), then evict beyond the budget."""
        if len(data) > self.max_bytes:
            return
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        with self._lock:
            self._bytes += len(data) - self._entries.pop(key, 0)
            self._entries[key] = len(data)
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
