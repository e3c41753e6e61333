"""Read whole inner chunks of a sharded Zarr v3 array straight from the shard files.

The fast path (see ``docs/FORMAT.md``): the shard index sits at the end of each shard file as
``N x (offset u64, nbytes u64)`` little endian plus a crc32c; an inner chunk is stored as its raw
little-endian bytes followed by their crc32c. So a chunk is one read of ``nbytes`` at ``offset``
straight into the caller's buffers (one ``preadv``, or a copy out of a cached ``mmap`` of the
shard file, see :mod:`loaders.store.rawio`), one hardware crc32c over it, and a numpy view: no
decompression, no intermediate copy. In a generic array a missing chunk (offset = nbytes =
2^64-1) or a missing shard file reads as the fill value; in a complete nostall store
(``complete=True``) it is corruption, and so is a shard file of another size (see
:mod:`loaders.store.shardindex`). With ``io="mmap"`` the file is ``stat``-ed before its mapping is
touched: a shard cut or replaced since it was mapped is mapped again (or reported), never read
past its end (which would raise SIGBUS).

Every byte comes through the store's :class:`~precompute.storage.base.ByteStore`: a folder (the
reads above) or an object store, where a shard's index is one ranged GET of its tail (which
also gives the object's size, checked like a file's, and its version), and a chunk one ranged
GET of exactly its bytes + crc32c from that version only (``If-Match``): an object replaced since
its index was read fails loudly instead of mixing two versions. A coded chunk's GET may be
started ahead (:meth:`ShardedArrayReader.fetch_ahead`: the batch reader fetches the next
window's while it decodes this one's). Bytes that crossed a network
are checked on every read; with a :class:`~loaders.store.readcache.ReadCache` each chunk is
looked up on local disk first and stored there after its GET, so a second epoch reads locally
(and is checked like a local store's). Requests run on the loader's read threads, so that many
are in flight.

A coded array (zstd, jpeg: :mod:`precompute.format.codecs`) is read the same way, each chunk
as stored (its size from the index), its crc32c checked over those bytes on every read, then
decoded on the read thread straight into the batch rows (:mod:`loaders.store.coded`); its
chunks are read, never mapped. Arrays whose codecs are not what the fast path understands
(another compressor, big endian, another index location) are read through zarr-python one
whole chunk region at a time: correct, slower. A checksum mismatch raises
:class:`~loaders.errors.CorruptChunkError` naming the array, shard file and chunk.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from loaders.errors import ChunkReadError, CorruptChunkError, UnsupportedArrayError
from loaders.store.chunkcheck import ChunkChecker
from loaders.store.coded import decode_flats, decode_runs, pack_runs
from loaders.store.rawio import MapCache, Stamp
from loaders.store.readcache import ReadCache
from loaders.store.rows import (
    Route,
    Run,
    copy_after,
    flat_parts,
    run_parts,
    runs_of,
    scatter,
    take_runs,
)
from loaders.store.shardindex import CRC_BYTES as _CRC
from loaders.store.shardindex import MISSING, ShardIndexCache
from loaders.store.zarrmeta import ArrayMeta, parse_array_meta
from precompute.storage.base import Blob
from precompute.storage.location import Location, location

__all__ = [
    "IO_MODES",
    "MISSING",
    "VERIFY_MODES",
    "ArrayMeta",
    "Route",
    "Run",
    "ShardedArrayReader",
    "parse_array_meta",
]

IO_MODES = ("pread", "mmap")
VERIFY_MODES = ("always", "first")


class ShardedArrayReader:
    """Reads whole inner chunks of one array, thread-safely, caching parsed shard indexes.

    Args:
        path: Folder of the array (holding its ``zarr.json``), its object-store URL, or its
            :class:`~precompute.storage.location.Location`.
        name: Name used in error messages (defaults to the folder name).
        io: ``pread`` (copy through the kernel) or ``mmap`` (copy out of cached mappings).
        maps: The mapping cache for ``io="mmap"`` (share one per store); default a 512 MiB one.
        verify: ``first`` (default) checks a chunk's crc32c on its first read by this reader,
            and again whenever its shard file changed since (inode, size or mtime): a store is
            immutable once complete, so later reads of a page-cache-hot chunk cost only the
            copy. ``always`` checks on every read.
        complete: The array is part of a complete nostall store: a missing shard file or
            chunk, or a shard file of the wrong size, raises :class:`CorruptChunkError`
            instead of reading as the fill value.
        cache: A local read-through cache of chunks, for an array whose store is remote (a
            local array reads its own files).
    """

    def __init__(
        self,
        path: str | Path | Location,
        name: str | None = None,
        *,
        io: str = "pread",
        maps: MapCache | None = None,
        verify: str = "first",
        complete: bool = False,
        cache: ReadCache | None = None,
    ) -> None:
        if io not in IO_MODES:
            raise ValueError(f"io must be one of {IO_MODES}, got {io!r}")
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, got {verify!r}")
        self.loc = location(path)
        self.store = self.loc.store
        self.path, self.io, self.verify, self.complete = str(self.loc), io, verify, complete
        self.name = name or self.path.rstrip("/").rsplit("/", 1)[-1]
        remote = self.store.remote
        self.cache = cache if remote else None
        self.meta = self._load_meta()
        shared = (maps if maps is not None else MapCache()) if io == "mmap" else None
        coded = self.meta.codec is not None  # chunks of their own sizes: read, never mapped
        self._maps = None if remote or coded else shared  # shard files; objects are fetched
        self._entry_maps = (
            shared if remote and self.cache is not None and not coded else None
        )  # cache entries
        self._zarr: Any = None
        self._index = ShardIndexCache(self.meta, self.name, complete, self._tail)
        self._check = ChunkChecker(self.name, verify)
        self._fetched = ChunkChecker(self.name, "always")  # bytes that crossed a network
        self._k = self.store.key_of  # a shard file's path or URL -> its store key
        self._versions: dict[str, str] = {}  # shard file -> the version its index came from
        self._whole: dict[str, Blob] = {}  # shard file -> the whole object (read_all)
        rows = self.meta.chunk_shape[0] if self.meta.chunk_shape else 1
        self._row_bytes = self.meta.chunk_nbytes // max(rows, 1)
        self._files: dict[tuple[int, ...], str] = {}  # chunk -> shard file (hot path)
        # chunk -> (stamp, its checked rows in the mapping), for verify="first": a later read
        # of the same file version is a stat, a lookup and the copy (see _hot_view)
        self._hot: dict[tuple[int, ...], tuple[Stamp, np.ndarray]] = {}
        self._hot_drops = 0
        self._hot_lock = threading.Lock()
        # batch reads copy JPEG streams into the rows undecoded, for a decoder on the device
        # (loaders.transfer.devicedecode); set by the loader, never for other codecs
        self.pack = False
        # coded chunks whose stored bytes are being fetched ahead (fetch_ahead), by chunk: the
        # fetch, and the pool it runs on (its batch reader's)
        self._ahead: dict[tuple[int, ...], tuple[Future[memoryview | None], Executor]] = {}
        self._ahead_lock = threading.Lock()

    @property
    def fast(self) -> bool:
        """True when chunks are read from the shard bytes directly."""
        return self.meta.fast

    @property
    def fetches_ahead(self) -> bool:
        """Whether :meth:`fetch_ahead` fetches anything: a coded array in object storage."""
        return bool(self.store.remote and self.fast and self.meta.codec is not None)

    def fetch_ahead(self, chunks: Sequence[tuple[int, ...]], pool: Executor) -> None:
        """Start fetching the stored bytes of coded ``chunks`` on ``pool``, for reads to come.

        So that a network's transfer of the next chunks overlaps the decoding of these: a
        later read of such a chunk (:meth:`read_chunk_runs`, :meth:`read_chunk_into`) takes
        its bytes (crc32c checked, as any fetch) or its error from the fetch instead of
        fetching again. Nothing for a local or raw array (its reads land in the batch rows).
        """
        if not self.fetches_ahead:
            return
        with self._ahead_lock:
            for chunk in chunks:
                if chunk not in self._ahead:
                    fetch = pool.submit(self._stored, chunk, self._file_of(chunk))
                    self._ahead[chunk] = (fetch, pool)

    def drop_ahead(self, pool: Executor | None = None) -> None:
        """Forget the fetches started ahead on ``pool`` (None: every one), cancelling them.

        A batch reader drops its own when its epoch restarts or it closes; a read that took
        a fetch cancelled meanwhile fetches the chunk itself.
        """
        with self._ahead_lock:
            gone = [c for c, (_, p) in self._ahead.items() if pool is None or p is pool]
            fetches = [self._ahead.pop(c)[0] for c in gone]
        for fetch in fetches:
            fetch.cancel()

    def _fetched_ahead(self, chunk: tuple[int, ...], path: str) -> memoryview | None:
        """The stored bytes of ``chunk``: from its fetch started ahead, else fetched now."""
        with self._ahead_lock:
            ahead = self._ahead.pop(chunk, None)
        if ahead is not None:
            try:
                return ahead[0].result()  # its bytes, or the error its fetch raised
            except CancelledError:
                pass  # dropped before it ran
        return self._stored(chunk, path)

    def _load_meta(self) -> ArrayMeta:
        meta = self.loc / "zarr.json"
        try:
            doc = json.loads(bytes(self.store.get(meta.key).data))
        except (OSError, ValueError, RecursionError) as exc:
            raise UnsupportedArrayError(f"{meta}: unreadable array metadata: {exc}") from exc
        return parse_array_meta(doc, str(meta))

    def _tail(self, path: str, nbytes: int) -> tuple[Any, int, Stamp]:
        """The last ``nbytes`` of shard ``path``, its size and stamp (its version remembered)."""
        whole = self._whole.get(path)
        blob = whole if whole is not None else self.store.get(self._k(path), None, nbytes)
        self._versions[path] = blob.version
        data = memoryview(blob.data)
        return (data[-nbytes:] if len(data) >= nbytes else b""), blob.size, blob.stamp

    def shard_file(self, chunk: Sequence[int]) -> str:
        """Return the path (or URL) of the shard file holding inner chunk ``chunk``."""
        shard = [c // n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True)]
        sep = self.meta.separator
        return f"{self.path}/c{sep}{sep.join(str(s) for s in shard)}"

    def _file_of(self, chunk: tuple[int, ...]) -> str:
        """:meth:`shard_file` of a chunk checked to be in the grid (both cached: hot path)."""
        path = self._files.get(chunk)
        if path is None:
            self._check_chunk(chunk)
            path = self._files[chunk] = self.shard_file(chunk)
        return path

    def read_chunk(self, chunk: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
        """Read inner chunk ``chunk`` (chunk-grid coordinates) whole.

        Args:
            chunk: Coordinates in the inner chunk grid.
            out: Optional C-contiguous buffer of the chunk's shape and dtype, filled in place.

        Returns:
            ``out`` (or a new array) holding the chunk; edge chunks include their padding.

        Raises:
            CorruptChunkError: Checksum mismatch or truncated data.
            ChunkReadError: Any other I/O failure.
        """
        out = self._out(out)
        self.read_chunk_into(chunk, [out])
        return out

    def read_chunk_into(
        self, chunk: Sequence[int], parts: Sequence[np.ndarray | memoryview]
    ) -> None:
        """Read inner chunk ``chunk`` whole, scattering its bytes over ``parts`` in order.

        ``parts`` are writeable C-contiguous arrays or buffers whose sizes add up to the
        chunk's bytes (e.g. one destination row per sample), so samples land directly where
        they are needed, with the checksum still covering the whole chunk.

        Raises:
            ValueError: The parts do not add up to one chunk.
            CorruptChunkError: Checksum mismatch or truncated data.
            ChunkReadError: Any other I/O failure.
        """
        chunk = tuple(int(c) for c in chunk)
        self._check_chunk(chunk)
        flats = flat_parts(parts)
        if sum(f.nbytes for f in flats) != self.meta.chunk_nbytes:
            raise ValueError(
                f"{self.name}: parts hold {sum(f.nbytes for f in flats)} bytes, "
                f"a chunk has {self.meta.chunk_nbytes}"
            )
        self._read_flats(chunk, flats, self.shard_file(chunk))

    def _read_flats(self, chunk: tuple[int, ...], flats: list[memoryview], path: str) -> None:
        """Read checked chunk ``chunk`` of shard file ``path`` over the byte views ``flats``."""
        try:
            if self.fast and self.meta.codec is not None:
                self._read_coded(chunk, path, lambda data: decode_flats(self.meta, data, flats))
            elif self.fast:
                self._read_fast(chunk, flats, path)
            else:
                self._current(chunk, path)  # complete: a missing file raises
                scatter(self._read_zarr(chunk), flats)
        except ChunkReadError:
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, path, chunk, _why(exc, path)) from exc

    def read_chunk_rows(self, chunk: Sequence[int], routes: Sequence[Route]) -> None:
        """Read inner chunk ``chunk`` whole and copy selected rows (axis 0) to destinations.

        Each route ``(dest, dest_rows, chunk_rows)`` copies chunk rows ``chunk_rows`` to rows
        ``dest_rows`` of ``dest`` (a C-contiguous array with rows of the same byte size, e.g.
        a batch). With ``io="mmap"`` each row is copied once, straight out of the mapped
        shard file, and rows no route asks for are never copied; with
        ``io="pread"`` one ``preadv`` lands each routed row in place (the rest in scratch).
        The checksum covers the whole chunk either way (with ``io="mmap"`` it is checked
        before any row is copied).

        Raises:
            CorruptChunkError: Checksum mismatch or truncated data.
            ChunkReadError: Any other I/O failure.
        """
        chunk = tuple(int(c) for c in chunk)
        self.read_chunk_runs(chunk, runs_of(routes, self.meta.chunk_shape[0], self._row_bytes))

    def read_chunk_runs(self, chunk: tuple[int, ...], runs: Sequence[Run]) -> None:
        """:meth:`read_chunk_rows` for runs (:data:`loaders.store.rows.Run`), the hot path.

        The batch reader builds its runs itself, in range by construction, so nothing per row
        or per run is checked again here; ``chunk`` is a tuple of ints.

        Raises:
            CorruptChunkError: Checksum mismatch or truncated data.
            ChunkReadError: Any other I/O failure.
        """
        path = self._file_of(chunk)
        rows = self.meta.chunk_shape[0]
        if self.fast and self.meta.codec is not None:
            into = pack_runs if self.pack else decode_runs
            self._read_coded(chunk, path, lambda data: into(self.meta, data, runs))
            return
        if not (self.fast and self._maps is not None):
            views, copies = run_parts(runs, rows, self._row_bytes)
            self._read_flats(chunk, views, path)
            copy_after(copies)  # rows served twice (weighted sampling), read once
            return
        try:
            current = self._current(chunk, path)
            hot = self._hot_view(chunk, current)
            if hot is not None:
                self._maps.touch(path)  # least recently used stays true for the budget
                take_runs(hot, runs)
                return
            drops = self._maps.drops
            found = self._mapped_chunk(chunk, path, current)
            if found is None:
                fill = (
                    np.full(math.prod(self.meta.chunk_shape), self.meta.fill_value, self.meta.dtype)
                    .view(np.uint8)
                    .reshape(rows, -1)
                )
                take_runs(fill, runs)
                return
            # check first, then copy: the checksum pass pulls the chunk into the cache, so
            # the copy reads it from there (cheaper than copying first and checking after)
            self._check.check_mapped(chunk, path, *found)
            view = found[0][:-_CRC].reshape(rows, -1)
            self._remember(chunk, current, view, drops)
            take_runs(view, runs)
        except (ChunkReadError, ValueError):
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, path, chunk, _why(exc, path)) from exc

    def _hot_view(self, chunk: tuple[int, ...], current: Stamp | None) -> np.ndarray | None:
        """Return the remembered rows of ``chunk`` if its file is still version ``current``.

        The views are forgotten whenever the map cache dropped a mapping since they were
        taken, so they never keep an unmapped file alive past the next read.
        """
        maps = self._maps
        if maps is None or current is None or self.verify != "first":
            return None
        if maps.drops != self._hot_drops:
            with self._hot_lock:
                self._hot.clear()
                self._hot_drops = maps.drops
            return None
        entry = self._hot.get(chunk)
        return entry[1] if entry is not None and entry[0] == current else None

    def _remember(
        self, chunk: tuple[int, ...], current: Stamp | None, view: np.ndarray, drops: int
    ) -> None:
        """Keep ``view`` (checked rows of ``chunk``, file version ``current``) for later reads.

        Only with ``verify="first"`` (``always`` checks every read), and only if no mapping was
        dropped since before ``view``'s mapping was looked up (it may be the dropped one).
        """
        if self.verify != "first" or current is None or self._maps is None:
            return
        with self._hot_lock:
            if self._maps.drops == drops == self._hot_drops:
                self._hot[chunk] = (current, view)

    def close(self) -> None:
        """Drop the cached shard mappings (a later read maps again); idempotent."""
        self.drop_ahead()
        with self._hot_lock:
            self._hot.clear()
        if self._maps is not None:
            self._maps.clear()

    def read_all(self) -> np.ndarray:
        """Read the whole array chunk by chunk (for small arrays such as labels).

        Every shard file is read whole first, several at once (one GET each from an object
        store, not one per chunk), then its chunks are taken out of it.
        """
        grid = np.ndindex(*self.meta.grid_shape)
        with self._whole_files(sorted({self.shard_file(c) for c in grid})):
            return self._read_all()

    @contextmanager
    def _whole_files(self, paths: Sequence[str], threads: int = 16) -> Iterator[None]:
        """Within: indexes and chunks of ``paths`` come from whole files read up front."""

        def fetch(path: str) -> tuple[str, Blob | None]:
            try:
                return path, self.store.get(self._k(path))
            except FileNotFoundError:  # left to the reads to report
                return path, None

        with ThreadPoolExecutor(threads, thread_name_prefix="nostall-whole") as pool:
            self._whole = {p: b for p, b in pool.map(fetch, paths) if b is not None}
        try:
            yield
        finally:
            self._whole = {}

    def _read_all(self) -> np.ndarray:
        out = np.empty(self.meta.shape, self.meta.dtype)
        buf = np.empty(self.meta.chunk_shape, self.meta.dtype)
        for chunk in np.ndindex(*self.meta.grid_shape):
            self.read_chunk(chunk, buf)
            region = self._region(chunk)
            out[region] = buf[tuple(slice(0, r.stop - r.start) for r in region)]
        return out

    def _region(self, chunk: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(c * n, min((c + 1) * n, size))
            for c, n, size in zip(chunk, self.meta.chunk_shape, self.meta.shape, strict=True)
        )

    def _check_chunk(self, chunk: tuple[int, ...]) -> None:
        grid = self.meta.grid_shape
        if len(chunk) != len(grid) or not all(0 <= c < g for c, g in zip(chunk, grid, strict=True)):
            raise IndexError(f"{self.name}: chunk {chunk} outside the chunk grid {grid}")

    def _out(self, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            return np.empty(self.meta.chunk_shape, self.meta.dtype)
        if (
            out.shape != self.meta.chunk_shape
            or out.dtype != self.meta.dtype
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(
                f"{self.name}: out must be a writeable C-contiguous "
                f"{self.meta.dtype} array of shape {self.meta.chunk_shape}, got "
                f"{out.dtype} {out.shape}"
            )
        return out

    def _current(self, chunk: tuple[int, ...], path: str) -> Stamp | None:
        """Return the stamp of shard file ``path`` now (None: no cheap one, or missing).

        One ``stat`` per chunk read of a local store: ``verify="first"`` re-checks a changed
        file, a cached index or mapping of another version of the file is dropped, and a
        mapping is only touched after its file's size was checked. An object store has no
        cheap stamp: each read names the version its index came from instead.

        Raises:
            CorruptChunkError: ``complete`` and the shard file is missing.
        """
        try:
            return self.store.stamp(self._k(path))
        except FileNotFoundError:
            if self.complete:
                raise CorruptChunkError(
                    self.name,
                    path,
                    chunk,
                    "shard file is missing (a complete store has every shard)",
                ) from None
            return None

    def _fill(self, flats: list[memoryview]) -> None:
        fill = np.full(math.prod(self.meta.chunk_shape), self.meta.fill_value, self.meta.dtype)
        scatter(fill, flats)

    def _read_fast(self, chunk: tuple[int, ...], flats: list[memoryview], path: str) -> None:
        if self._maps is not None and not self._whole:
            found = self._mapped_chunk(chunk, path, self._current(chunk, path))
            if found is None:
                self._fill(flats)
            else:
                scatter(found[0][:-_CRC], flats)
                self._check.check_mapped(chunk, path, *found)
            return
        stamp = self._current(chunk, path)  # before the read: a change is caught next time
        offset, nbytes = self._index.locate(chunk, path, stamp)
        if offset == MISSING and nbytes == MISSING:
            self._fill(flats)
            return
        tail = np.zeros(_CRC, np.uint8)
        parts = [*flats, tail]
        if self.cache is not None and self._cached(chunk, path, parts, offset, nbytes):
            return
        got = self._fetch(path, parts, offset, nbytes, stamp)
        if got != nbytes:
            raise CorruptChunkError(self.name, path, chunk, f"truncated: {got} of {nbytes} bytes")
        checker = self._check if stamp is not None else self._fetched
        checker.check(chunk, path, flats, int.from_bytes(tail.tobytes(), "little"), stamp)
        if self.cache is not None:  # checked: worth keeping
            self.cache.put(self._cache_key(path, offset, nbytes), parts)

    def read_stored(self, chunk: Sequence[int]) -> memoryview:
        """The bytes of coded inner chunk ``chunk`` as stored, crc32c checked and cut off.

        For a decoder elsewhere (DALI's): the chunk's codec says how to read them.

        Raises:
            CorruptChunkError: The chunk is missing, cut, or fails its crc32c.
            ChunkReadError: Any other I/O failure.
        """
        chunk = tuple(int(c) for c in chunk)
        path = self._file_of(chunk)
        try:
            data = self._stored(chunk, path)
        except (ChunkReadError, ValueError):
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, path, chunk, _why(exc, path)) from exc
        if data is None:
            raise CorruptChunkError(self.name, path, chunk, "chunk is missing")
        return data

    def _read_coded(self, chunk: tuple[int, ...], path: str, decode: Any) -> None:
        """Read coded chunk ``chunk`` as stored, check its crc32c, then ``decode(bytes)``.

        A chunk never written (a generic array) decodes as the fill value.

        Raises:
            CorruptChunkError: Cut, a crc32c mismatch, or bytes that do not decode.
            ChunkReadError: Any other I/O failure.
        """
        try:
            data = self._fetched_ahead(chunk, path)
            if data is None:
                fill = np.full(self.meta.chunk_shape, self.meta.fill_value, self.meta.dtype)
                data = memoryview(
                    self.meta.codec.codec.encode(
                        fill, self.meta.codec.options, self.meta.fill_value
                    )
                )
            decode(data)
        except ValueError as exc:  # crc32c-sound bytes that do not decode: a writer's fault
            raise CorruptChunkError(self.name, path, chunk, f"does not decode: {exc}") from None
        except (ChunkReadError, ImportError):
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, path, chunk, _why(exc, path)) from exc

    def _stored(self, chunk: tuple[int, ...], path: str) -> memoryview | None:
        """The stored bytes of coded chunk ``chunk`` (crc32c checked and cut off); None: missing."""
        stamp = self._current(chunk, path)
        offset, nbytes = self._index.locate(chunk, path, stamp)
        if offset == MISSING and nbytes == MISSING:
            return None
        buf = np.empty(nbytes, np.uint8)
        cache = self.cache
        entry = self._cache_key(path, offset, nbytes) if cache is not None else ""
        found = cache.read_into(entry, [buf]) if cache is not None else None
        if found is None or found[0] != nbytes or not _sound(buf):
            if cache is not None and found is not None:
                cache.discard(entry)
            got = self._fetch(path, [buf], offset, nbytes, stamp)
            if got != nbytes:
                raise CorruptChunkError(
                    self.name, path, chunk, f"truncated: {got} of {nbytes} bytes"
                )
            stored = int.from_bytes(buf[-_CRC:].tobytes(), "little")
            self._fetched.check(chunk, path, [buf[:-_CRC]], stored, stamp)  # every read
            if cache is not None:
                cache.put(entry, [buf])
        return memoryview(buf.data)[:-_CRC]

    def _fetch(
        self, path: str, parts: list[Any], offset: int, nbytes: int, stamp: Stamp | None
    ) -> int:
        """Read ``nbytes`` at ``offset`` of ``path`` into ``parts``.

        From a whole file read up front, else from the store: only from the version its index
        came from, where the store gives no stamp to check a change by.
        """
        whole = self._whole.get(path)
        if whole is not None:
            data = memoryview(whole.data)[offset : offset + nbytes]
            scatter(np.frombuffer(data, np.uint8), parts)
            return len(data)
        version = None if stamp is not None else self._versions.get(path)
        return self.store.read_into(self._k(path), parts, offset, if_version=version)

    def _cache_key(self, path: str, offset: int, nbytes: int) -> str:
        return ReadCache.key(path, self._versions.get(path, ""), offset, nbytes)

    def _cached(
        self, chunk: tuple[int, ...], path: str, parts: list[Any], offset: int, nbytes: int
    ) -> bool:
        """Read the chunk from the read-through cache into ``parts``; False on a miss.

        An entry that is cut or fails its checksum is dropped (the chunk is then fetched).
        """
        if self.cache is None:
            return False
        entry = self._cache_key(path, offset, nbytes)
        flats, tail = parts[:-1], parts[-1]
        try:
            if self._entry_maps is not None:  # copied out of a kept mapping of the entry
                mapped = self.cache.mapped(entry, self._entry_maps)
                if mapped is None:
                    return False
                data, stamp = mapped
                if data.nbytes != nbytes:
                    raise CorruptChunkError(self.name, path, chunk, "cut cache entry")
                self._check.check_mapped(chunk, path, data, stamp)
                scatter(data[:-_CRC], flats)
                return True
            found = self.cache.read_into(entry, parts)
            if found is None:
                return False
            got, stamp = found
            if got != nbytes:
                raise CorruptChunkError(self.name, path, chunk, "cut cache entry")
            stored = int.from_bytes(tail.tobytes(), "little")
            self._check.check(chunk, path, flats, stored, stamp)
        except CorruptChunkError:
            self.cache.discard(entry)
            return False
        return True

    def _mapped_chunk(
        self, chunk: tuple[int, ...], path: str, current: Stamp | None
    ) -> tuple[np.ndarray, Stamp] | None:
        """Return the chunk's bytes + crc32c in its mapped shard file, and the file's stamp.

        None if the chunk is missing. ``current`` is the file's stamp (:meth:`_current`),
        taken by the caller just before: a mapping of another version of the file is replaced.
        """
        offset, nbytes = self._index.locate(chunk, path, current)
        if offset == MISSING and nbytes == MISSING:
            return None
        if self._maps is None:
            raise RuntimeError("a mapped read without a map cache")
        end = offset + self.meta.chunk_nbytes + _CRC
        if current is not None and end > current[1]:  # cut since its index was read
            raise CorruptChunkError(
                self.name,
                path,
                chunk,
                f"truncated: the file has {current[1]} bytes, the chunk ends at byte {end}",
            )
        mapped, stamp = self._maps.get(path, current)  # mapped again if the file changed
        if end > mapped.nbytes:
            raise CorruptChunkError(
                self.name, path, chunk, f"truncated: file ends before byte {end}"
            )
        return mapped[offset:end], stamp

    def _read_zarr(self, chunk: tuple[int, ...]) -> np.ndarray:
        if self._zarr is None:
            from precompute.storage.location import open_array  # lazy: zarr, the fallback only

            self._zarr = open_array(self.loc)
        region = self._region(chunk)
        out = np.full(self.meta.chunk_shape, self.meta.fill_value, self.meta.dtype)
        out[tuple(slice(0, r.stop - r.start) for r in region)] = self._zarr[region]
        return out


def _sound(buf: np.ndarray) -> bool:
    """Whether ``buf`` is bytes followed by their crc32c."""
    from precompute.format.shardcodec import chunk_sound

    return chunk_sound(buf.data)


def _why(exc: BaseException, path: str) -> str:
    """A failure as a reason: a store's message about ``path`` without it, else the repr."""
    text = str(exc)
    return text[len(path) + 2 :] if text.startswith(f"{path}: ") else repr(exc)
