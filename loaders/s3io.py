"""Shard bytes from object storage: ranged GETs of shard indexes and whole inner chunks.

A shard's index is read once, by one ranged GET of its tail (``Range: bytes=-N``); the response
also gives the object's size (checked like a local file's) and ETag. An inner chunk is then one
ranged GET of exactly its bytes + crc32c, conditional on that ETag (``If-Match``): an object
replaced since its index was read fails loudly instead of mixing two versions. Requests run on
the loader's read threads (``num_threads``), so that many are in flight. With a
:class:`~loaders.readcache.ReadCache` every chunk is looked up on local disk first and stored
there after its GET: a second epoch reads locally.
"""

from __future__ import annotations

import threading
import zlib

from loaders.errors import ChunkReadError
from loaders.rawio import Stamp
from loaders.readcache import ReadCache
from precompute import objstore

__all__ = ["RemoteShards"]


def _stamp(etag: str, size: int) -> Stamp:
    """A :data:`Stamp` for an object version: (hash of its ETag, size, 0)."""
    return zlib.crc32(etag.encode()), size, 0


class RemoteShards:
    """Ranged reads of one array's shard objects; thread-safe.

    Args:
        name: Array name used in error messages.
        cache: Optional local read-through cache of chunks.
    """

    def __init__(self, name: str, cache: ReadCache | None = None) -> None:
        self.name, self.cache = name, cache
        self._etags: dict[str, str] = {}
        self._lock = threading.Lock()
        self.requests = self.bytes_fetched = 0

    def _count(self, nbytes: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_fetched += nbytes

    def tail(self, url: str, nbytes: int) -> tuple[bytes, int, Stamp]:
        """GET the last ``nbytes`` of shard object ``url``: ``(bytes, object size, stamp)``.

        Raises:
            FileNotFoundError: No such object.
            OSError: The GET failed.
        """
        got = objstore.get_range(url, None, nbytes)
        self._count(len(got.data))
        with self._lock:
            self._etags[url] = got.etag
        return got.data, got.size, _stamp(got.etag, got.size)

    def chunk(
        self, url: str, coords: tuple[int, ...], offset: int, nbytes: int
    ) -> tuple[bytes, str | None]:
        """Return ``nbytes`` at ``offset`` of ``url`` (its index was read by :meth:`tail`).

        Returns:
            The bytes, and the cache entry they came from (None: fetched now), to
            :meth:`forget` if they fail their checksum.

        Raises:
            ChunkReadError: The GET failed, or the object changed since its index was read.
        """
        etag = self._etags.get(url, "")
        key = ReadCache.key(url, etag, offset, nbytes) if self.cache is not None else None
        if self.cache is not None and key is not None:
            data = self.cache.get(key)
            if data is not None and len(data) == nbytes:
                return data, key
        try:
            got = objstore.get_range(url, offset, nbytes, if_match=etag or None)
        except (OSError, FileExistsError) as exc:
            raise ChunkReadError(self.name, url, coords, str(exc).removeprefix(f"{url}: ")) from exc
        self._count(len(got.data))
        if self.cache is not None and key is not None and len(got.data) == nbytes:
            self.cache.put(key, got.data)
        return got.data, None

    def forget(self, entry: str | None) -> None:
        """Drop cache entry ``entry`` (its bytes failed their checksum)."""
        if entry is not None and self.cache is not None:
            self.cache.discard(entry)
