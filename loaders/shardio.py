"""Read whole inner chunks of a sharded Zarr v3 array straight from the shard files.

The fast path (see ``docs/FORMAT.md``): the shard index sits at the end of each shard file as
``N x (offset u64, nbytes u64)`` little endian plus a crc32c; an inner chunk is stored as its raw
little-endian bytes followed by their crc32c. So one chunk is one ``preadv`` of ``nbytes`` at
``offset`` directly into the caller's (reusable) buffer, one hardware crc32c over it, and a
numpy view: no decompression, no extra copy. A missing chunk (offset = nbytes = 2^64-1) or a
missing shard file reads as the fill value.

Arrays whose codecs are not exactly what the fast path understands (compression, big endian,
another index location), and remote (fsspec URL) arrays, are read through zarr-python one whole
chunk region at a time: correct, slower. A checksum mismatch raises
:class:`~loaders.errors.CorruptChunkError` naming the array, shard file and chunk.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

from loaders.errors import ChunkReadError, CorruptChunkError, UnsupportedArrayError

__all__ = ["MISSING", "ArrayMeta", "ShardedArrayReader", "parse_array_meta"]

MISSING = 2**64 - 1  # offset and nbytes of an inner chunk that was never written
_CRC = 4
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 1024
_NUMERIC = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64"}


@dataclass(frozen=True)
class ArrayMeta:
    """What a reader needs from an array's ``zarr.json``.

    Attributes:
        shape: Array shape.
        dtype: Numpy dtype of the decoded chunk (little endian on the fast path).
        fill_value: Value of never-written elements.
        shard_shape: Shape of one shard (the outer chunk grid).
        chunk_shape: Shape of one inner chunk (the read unit).
        separator: Chunk key separator (``/`` or ``.``).
        fast: True when the raw-bytes fast path applies.
        reason: Why the fast path does not apply (empty when it does).
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    shard_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    separator: str
    fast: bool
    reason: str = ""

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        """Inner chunks per shard along each axis."""
        return tuple(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of inner chunks along each axis of the whole array."""
        return tuple(math.ceil(n / c) for n, c in zip(self.shape, self.chunk_shape, strict=True))

    @property
    def chunk_nbytes(self) -> int:
        """Bytes of one decoded inner chunk (without its crc32c)."""
        return math.prod(self.chunk_shape) * self.dtype.itemsize


def _is_bytes(codec: Mapping[str, Any], itemsize: int) -> bool:
    if codec.get("name") != "bytes":
        return False
    endian = (codec.get("configuration") or {}).get("endian")
    return endian == "little" or (endian is None and itemsize == 1)


def _is_crc(codec: Mapping[str, Any]) -> bool:
    return codec.get("name") == "crc32c"


def _fast_path_problem(doc: Mapping[str, Any], dtype: np.dtype) -> str:
    """Return why ``doc`` is not readable by the fast path, or '' when it is."""
    if doc.get("storage_transformers"):
        return "storage transformers are not supported"
    codecs = doc.get("codecs", [])
    if len(codecs) != 1 or codecs[0].get("name") != "sharding_indexed":
        return f"codecs {[c.get('name') for c in codecs]} are not a single sharding_indexed"
    conf = codecs[0].get("configuration", {})
    inner, index = conf.get("codecs", []), conf.get("index_codecs", [])
    if conf.get("index_location", "end") != "end":
        return "shard index is not at the end"
    if len(inner) != 2 or not (_is_bytes(inner[0], dtype.itemsize) and _is_crc(inner[1])):
        return f"inner codecs {[c.get('name') for c in inner]} are not [bytes(little), crc32c]"
    if len(index) != 2 or not (_is_bytes(index[0], 8) and _is_crc(index[1])):
        return f"index codecs {[c.get('name') for c in index]} are not [bytes(little), crc32c]"
    return ""


def parse_array_meta(doc: Mapping[str, Any], where: str = "array") -> ArrayMeta:
    """Parse a Zarr v3 array ``zarr.json`` document.

    Raises:
        UnsupportedArrayError: Not a Zarr v3 array with a regular chunk grid and numeric dtype.
    """
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "array":
        raise UnsupportedArrayError(f"{where}: not a Zarr v3 array")
    grid = doc.get("chunk_grid", {})
    if grid.get("name") != "regular":
        raise UnsupportedArrayError(f"{where}: chunk grid {grid.get('name')!r} is not regular")
    if doc.get("data_type") not in _NUMERIC:
        raise UnsupportedArrayError(f"{where}: data type {doc.get('data_type')!r} not supported")
    dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    shape = tuple(int(n) for n in doc["shape"])
    shard_shape = tuple(int(n) for n in grid["configuration"]["chunk_shape"])
    codecs = doc.get("codecs", [])
    sharded = len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed"
    chunk_shape = (tuple(int(n) for n in codecs[0]["configuration"]["chunk_shape"])
                   if sharded else shard_shape)
    key = doc.get("chunk_key_encoding", {})
    sep = (key.get("configuration") or {}).get("separator", "/")
    problem = _fast_path_problem(doc, dtype)
    if not problem and key.get("name") != "default":
        problem = f"chunk key encoding {key.get('name')!r} is not 'default'"
    try:
        fill = dtype.type(doc.get("fill_value", 0))
    except (TypeError, ValueError) as exc:
        raise UnsupportedArrayError(f"{where}: fill value {doc.get('fill_value')!r}") from exc
    return ArrayMeta(shape, dtype, fill, shard_shape, chunk_shape, sep, not problem, problem)


def _preadv_all(path: str, views: list[memoryview], offset: int) -> int:
    """``preadv`` ``views`` from ``path`` at ``offset``, at most IOV_MAX buffers per call."""
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for first in range(0, len(views), _IOV_MAX):
            group = views[first:first + _IOV_MAX]
            got = os.preadv(fd, group, offset + total)
            total += got
            if got != sum(v.nbytes for v in group):
                break  # short read: the caller reports the truncation
    finally:
        os.close(fd)
    return total


class ShardedArrayReader:
    """Reads whole inner chunks of one array, thread-safely, caching parsed shard indexes.

    Args:
        path: Folder of the array (holding its ``zarr.json``), or an fsspec URL (read through
            zarr-python).
        name: Name used in error messages (defaults to the folder name).
    """

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = str(path)
        self.name = name or self.path.rstrip("/").rsplit("/", 1)[-1]
        self._remote = "://" in self.path
        self.meta = self._load_meta()
        self._zarr: Any = None
        self._indexes: dict[tuple[int, ...], np.ndarray | None] = {}
        self._lock = threading.Lock()

    @property
    def fast(self) -> bool:
        """True when chunks are read from the shard bytes directly."""
        return self.meta.fast and not self._remote

    def _load_meta(self) -> ArrayMeta:
        if self._remote:
            import zarr  # lazy: only the fallback needs zarr-python

            doc = zarr.open_array(self.path, mode="r").metadata.to_dict()
        else:
            meta = Path(self.path) / "zarr.json"
            try:
                doc = json.loads(meta.read_text())
            except (OSError, ValueError) as exc:
                raise UnsupportedArrayError(f"{meta}: unreadable array metadata: {exc}") from exc
        return parse_array_meta(doc, self.path)

    def shard_file(self, chunk: Sequence[int]) -> str:
        """Return the path of the shard file holding inner chunk ``chunk``."""
        shard = [c // n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True)]
        sep = self.meta.separator
        return f"{self.path}/c{sep}{sep.join(str(s) for s in shard)}"

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
        chunk = tuple(int(c) for c in chunk)
        self._check_chunk(chunk)
        out = self._out(out)
        try:
            if self.fast:
                self._read_fast(chunk, [memoryview(out).cast("B")])  # type: ignore[arg-type]
            else:
                self._read_zarr(chunk, out)
        except ChunkReadError:
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, self.shard_file(chunk), chunk, repr(exc)) from exc
        return out

    def read_chunk_into(self, chunk: Sequence[int], parts: Sequence[np.ndarray]) -> None:
        """Read inner chunk ``chunk`` whole, scattering its bytes over ``parts`` in order.

        ``parts`` are writeable C-contiguous arrays whose sizes add up to the chunk's bytes
        (e.g. one destination row per sample); on the fast path a single ``preadv`` fills them,
        so samples land directly where they are needed, with the checksum still covering the
        whole chunk.

        Raises:
            ValueError: The parts do not add up to one chunk.
            CorruptChunkError: Checksum mismatch or truncated data.
            ChunkReadError: Any other I/O failure.
        """
        chunk = tuple(int(c) for c in chunk)
        self._check_chunk(chunk)
        views = [memoryview(p).cast("B") for p in parts]  # type: ignore[arg-type]
        if sum(v.nbytes for v in views) != self.meta.chunk_nbytes:
            raise ValueError(f"{self.name}: parts hold {sum(v.nbytes for v in views)} bytes, "
                             f"a chunk has {self.meta.chunk_nbytes}")
        try:
            if self.fast:
                self._read_fast(chunk, views)
            else:
                whole = memoryview(self.read_chunk(chunk)).cast("B")  # type: ignore[arg-type]
                pos = 0
                for view in views:
                    view[:] = whole[pos:pos + view.nbytes]
                    pos += view.nbytes
        except ChunkReadError:
            raise
        except Exception as exc:
            raise ChunkReadError(self.name, self.shard_file(chunk), chunk, repr(exc)) from exc

    def read_all(self) -> np.ndarray:
        """Read the whole array chunk by chunk (for small arrays such as labels)."""
        out = np.empty(self.meta.shape, self.meta.dtype)
        buf = np.empty(self.meta.chunk_shape, self.meta.dtype)
        for chunk in np.ndindex(*self.meta.grid_shape):
            self.read_chunk(chunk, buf)
            region = self._region(chunk)
            out[region] = buf[tuple(slice(0, r.stop - r.start) for r in region)]
        return out

    def _region(self, chunk: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(c * n, min((c + 1) * n, size)) for c, n, size in
                     zip(chunk, self.meta.chunk_shape, self.meta.shape, strict=True))

    def _check_chunk(self, chunk: tuple[int, ...]) -> None:
        grid = self.meta.grid_shape
        if len(chunk) != len(grid) or not all(0 <= c < g for c, g in zip(chunk, grid, strict=True)):
            raise IndexError(f"{self.name}: chunk {chunk} outside the chunk grid {grid}")

    def _out(self, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            return np.empty(self.meta.chunk_shape, self.meta.dtype)
        if (out.shape != self.meta.chunk_shape or out.dtype != self.meta.dtype
                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"{self.name}: out must be a writeable C-contiguous "
                             f"{self.meta.dtype} array of shape {self.meta.chunk_shape}, got "
                             f"{out.dtype} {out.shape}")
        return out

    def _read_fast(self, chunk: tuple[int, ...], views: list[memoryview]) -> None:
        path = self.shard_file(chunk)
        index = self._index(chunk, path)
        local = tuple(c % n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        offset, nbytes = (int(v) for v in index[local]) if index is not None else (MISSING,) * 2
        if offset == MISSING and nbytes == MISSING:
            fill = np.asarray(self.meta.fill_value, self.meta.dtype)
            for view in views:
                np.frombuffer(view, self.meta.dtype)[...] = fill
            return
        want = self.meta.chunk_nbytes + _CRC
        if nbytes != want:
            raise CorruptChunkError(self.name, path, chunk, f"holds {nbytes} bytes, want {want}")
        tail = bytearray(_CRC)
        got = _preadv_all(path, [*views, memoryview(tail)], offset)
        if got != want:
            raise CorruptChunkError(self.name, path, chunk, f"truncated: {got} of {want} bytes")
        crc = 0
        for view in views:
            crc = crc32c.crc32c(view, crc)
        if crc != int.from_bytes(tail, "little"):
            raise CorruptChunkError(self.name, path, chunk, "crc32c checksum mismatch")

    def _index(self, chunk: tuple[int, ...], path: str) -> np.ndarray | None:
        key = tuple(c // n for c, n in zip(chunk, self.meta.chunks_per_shard, strict=True))
        with self._lock:
            if key in self._indexes:
                return self._indexes[key]
        index = self._read_index(chunk, path)
        with self._lock:
            self._indexes[key] = index
        return index

    def _read_index(self, chunk: tuple[int, ...], path: str) -> np.ndarray | None:
        per_shard = self.meta.chunks_per_shard
        size = math.prod(per_shard) * 16 + _CRC
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
        if len(raw) != size or crc32c.crc32c(raw[:-_CRC]) != int.from_bytes(raw[-_CRC:], "little"):
            raise CorruptChunkError(self.name, path, chunk, "shard index crc32c checksum mismatch")
        return np.frombuffer(raw[:-_CRC], "<u8").reshape(*per_shard, 2)

    def _read_zarr(self, chunk: tuple[int, ...], out: np.ndarray) -> None:
        if self._zarr is None:
            import zarr  # lazy: the fallback path only

            self._zarr = zarr.open_array(self.path, mode="r")
        region = self._region(chunk)
        out.fill(self.meta.fill_value)
        out[tuple(slice(0, r.stop - r.start) for r in region)] = self._zarr[region]
