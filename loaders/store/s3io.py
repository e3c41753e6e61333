"""Shard bytes from object storage: ranged GETs of shard indexes and whole inner chunks.

A shard's index is read once, by one ranged GET of its tail (``Range: bytes=-N``); the response
also gives the object's size (checked like a local file's) and ETag. An inner chunk is then one
ranged GET of exactly its bytes + crc32c, conditional on that ETag (``If-Match``): an object
replaced since its index was read fails loudly instead of mixing two versions. Requests run on
the loader's read threads (``num_threads``), so that many are in flight. With a
:class:`~loaders.store.readcache.ReadCache` every chunk is looked up on local disk first and stored
there after its GET: a second epoch reads locally.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from loaders.errors import ChunkReadError, CorruptChunkError, UnsupportedArrayError
from loaders.store.rawio import Stamp
from loaders.store.readcache import ReadCache
from loaders.store.shardindex import CRC_BYTES
from loaders.store.zarrmeta import ArrayMeta, parse_array_meta
from precompute.format.shardcodec import chunk_sound
from precompute.storage import objstore

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
        self._whole: dict[str, objstore.Range] | None = None  # see whole_objects
        self._lock = threading.Lock()
        self.requests = self.bytes_fetched = 0

    def _count(self, nbytes: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_fetched += nbytes

    @contextmanager
    def whole_objects(self, urls: Sequence[str], threads: int = 16) -> Iterator[None]:
        """Within: serve indexes and chunks of ``urls`` from whole objects, fetched up front.

        For reading a whole small array (labels, extents): one GET per shard object, ``threads``
        at a time, instead of one per chunk. A missing object is left to the reads to report.
        """

        def fetch(url: str) -> tuple[str, objstore.Range | None]:
            try:
                got = objstore.get_range(url)
            except FileNotFoundError:
                return url, None
            self._count(len(got.data))
            return url, got

        with ThreadPoolExecutor(threads, thread_name_prefix="nostall-s3") as pool:
            self._whole = {url: got for url, got in pool.map(fetch, urls) if got is not None}
        try:
            yield
        finally:
            self._whole = None

    def tail(self, url: str, nbytes: int) -> tuple[bytes, int, Stamp]:
        """GET the last ``nbytes`` of shard object ``url``: ``(bytes, object size, stamp)``.

        Raises:
            FileNotFoundError: No such object.
            OSError: The GET failed.
        """
        whole = self._whole.get(url) if self._whole is not None else None
        if whole is not None:
            data = whole.data[-nbytes:] if len(whole.data) >= nbytes else b""
            with self._lock:
                self._etags[url] = whole.etag
            return data, whole.size, _stamp(whole.etag, whole.size)
        got = objstore.get_range(url, None, nbytes)
        self._count(len(got.data))
        with self._lock:
            self._etags[url] = got.etag
        return got.data, got.size, _stamp(got.etag, got.size)

    def chunk(
        self, url: str, coords: tuple[int, ...], offset: int, nbytes: int
    ) -> tuple[bytes, str | None, bool]:
        """Return ``nbytes`` at ``offset`` of ``url`` (its index was read by :meth:`tail`).

        Returns:
            The bytes, their read-cache key (None without a cache), and whether they came
            from the cache. Fetched bytes are not cached here: :meth:`read_chunk` caches them
            once their crc32c holds.

        Raises:
            ChunkReadError: The GET failed, or the object changed since its index was read.
        """
        whole = self._whole.get(url) if self._whole is not None else None
        if whole is not None:
            return whole.data[offset : offset + nbytes], None, False
        etag = self._etags.get(url, "")
        key = None
        if self.cache is not None:
            key = ReadCache.key(url, etag, offset, nbytes)
            data = self.cache.get(key)
            if data is not None and len(data) == nbytes:
                return data, key, True
        try:
            got = objstore.get_range(url, offset, nbytes, if_match=etag or None)
        except (OSError, FileExistsError) as exc:
            raise ChunkReadError(self.name, url, coords, str(exc).removeprefix(f"{url}: ")) from exc
        self._count(len(got.data))
        if etag and got.etag and got.etag != etag:  # a server that ignores If-Match
            why = "the object was replaced while the store was read"
            raise ChunkReadError(self.name, url, coords, why)
        return got.data, key, False

    def read_chunk(self, url: str, coords: tuple[int, ...], offset: int, nbytes: int) -> np.ndarray:
        """Return the chunk's bytes (without its crc32c), checked: a GET or a cache hit.

        A cache entry that fails its checksum is dropped and the chunk fetched again; fetched
        bytes enter the cache only once they pass.

        Raises:
            CorruptChunkError: The fetched bytes are cut or fail their crc32c.
            ChunkReadError: The GET failed.
        """
        data, key, hit = self.chunk(url, coords, offset, nbytes)
        sound = _sound(data, nbytes)
        if hit and not sound and self.cache is not None and key is not None:
            self.cache.discard(key)
            data, key, hit = self.chunk(url, coords, offset, nbytes)
            sound = _sound(data, nbytes)
        if len(data) != nbytes:
            raise CorruptChunkError(
                self.name, url, coords, f"truncated: {len(data)} of {nbytes} bytes"
            )
        if not sound:
            raise CorruptChunkError(self.name, url, coords, "crc32c checksum mismatch")
        if not hit and self.cache is not None and key is not None:
            self.cache.put(key, data)
        return np.frombuffer(data, np.uint8, nbytes - CRC_BYTES)

    def array_meta(self, url: str) -> ArrayMeta:
        """GET and parse the array's ``zarr.json``.

        Raises:
            UnsupportedArrayError: It cannot be read or parsed.
        """
        meta = f"{url}/zarr.json"
        try:
            doc = json.loads(objstore.get_range(meta).data)
        except (OSError, ValueError, RecursionError) as exc:
            raise UnsupportedArrayError(f"{meta}: unreadable array metadata: {exc}") from exc
        return parse_array_meta(doc, meta)


def _sound(data: bytes, nbytes: int) -> bool:
    """Whether ``data`` is ``nbytes`` of chunk bytes followed by their crc32c."""
    return len(data) == nbytes and chunk_sound(data)
