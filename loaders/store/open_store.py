"""Open a store for streaming: validate it before the first batch and load its small arrays.

A field is *streamed* chunk by chunk (one :class:`ShardedArrayReader` per field, the same io,
verify and cache options as ``image``) when it lives in the image frame (its samples are
``(S, S, ...)``: images, masks) or a sample of it is larger than :data:`SMALL_ROW_BYTES`;
every other per-sample array (labels, keypoints, companions ``FIELD.WHAT``, ``extent``,
``valid``) is a few bytes per sample and is read whole at open time. A v1 store streams
``image`` and reads ``label`` whole; its valid mask is ``label >= 0``. A v2 store's valid mask
is its ``valid`` array (``docs/FORMAT.md``, "Format v2").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaders.errors import StoreMetadataError, StoreOpenError, UnsupportedArrayError
from loaders.store.rawio import MAP_BYTES, MapCache
from loaders.store.readcache import ReadCache
from loaders.store.shardio import IO_MODES, ShardedArrayReader
from precompute import errors as pre
from precompute.checks import size_hw
from precompute.fields import FieldSpec
from precompute.format.arrays import ArraySpec
from precompute.format.layout import StoreInfo, StoreLayout, open_store_info
from precompute.format.storecheck import (
    check_array_meta,
    expected_shard_size,
    shard_file_problems,
    sharded_names,
    store_sizes,
)
from precompute.storage.location import Location, location, open_array

__all__ = ["MAP_BYTES", "OPEN_IO_MODES", "SMALL_ROW_BYTES", "OpenedStore", "open_store"]

SMALL_ROW_BYTES = 4096  # a per-sample array up to this many bytes a sample is read whole
OPEN_IO_MODES = ("auto", *IO_MODES)


@dataclass(frozen=True)
class OpenedStore:
    """A validated store, ready to stream.

    Attributes:
        info: The store's metadata.
        streams: Chunk readers of the streamed arrays by name (``image`` first).
        small: The arrays read whole at open, by name: the other fields and companions,
            ``(N, ...)`` (or ``(N, K, ...)`` with a variant axis), as stored.
        extents: All valid extents, (N, 4) or (N, K, 4) int32 ``(top, left, height, width)``
            (the whole image for a store without spatial fields).
        valid: Mask of real samples: ``label >= 0`` (v1) or the ``valid`` array (v2).
        variant_axis: The arrays stored with a variant axis (spatial fields, ``extent``).
    """

    info: StoreInfo
    streams: Mapping[str, ShardedArrayReader]
    small: Mapping[str, np.ndarray]
    extents: np.ndarray
    valid: np.ndarray
    variant_axis: frozenset[str] = frozenset()

    @property
    def layout(self) -> StoreLayout:
        """The store's layout."""
        return self.info.layout

    @property
    def fields(self) -> tuple[FieldSpec, ...]:
        """The store's fields (a v1 store: ``image`` + ``label``)."""
        return self.info.fields

    @property
    def image(self) -> ShardedArrayReader:
        """Chunk reader of the ``image`` array."""
        return self._stream("image")

    @property
    def labels(self) -> np.ndarray:
        """All labels (N,), int64; -1 marks a hole."""
        if "label" not in self.small:
            raise StoreOpenError(str(self.info.path), "the store has no field 'label'")
        return self.small["label"]

    def keys(self) -> list[str]:
        """Every slot's source key (``""`` for a hole), read from the ``key`` array at once.

        Raises:
            StoreOpenError: The ``key`` array cannot be read.
        """
        try:
            return [str(k) for k in open_array(self.info.path / "key")[:].tolist()]
        except Exception as exc:  # zarr raises many types for a damaged array
            raise StoreOpenError(str(self.info.path), f"cannot read its keys: {exc}") from exc

    def _stream(self, name: str) -> ShardedArrayReader:
        if name not in self.streams:
            raise StoreOpenError(str(self.info.path), f"the store streams no field {name!r}")
        return self.streams[name]

    def row_shape(self, name: str) -> tuple[int, ...]:
        """The shape of one sample (one variant) of array ``name``."""
        return self.layout.arrays[name].shape[1 + (name in self.variant_axis) :]

    def chunk_coords(self, chunk: int, variant: int, name: str = "image") -> tuple[int, ...]:
        """Return the inner-chunk coordinates of sample chunk ``chunk``, ``variant``."""
        zeros = (0,) * len(self.row_shape(name))
        return (chunk, variant, *zeros) if name in self.variant_axis else (chunk, *zeros)

    def sample_ids(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """What a batch says of its samples ``index`` (slots): ``{"index": index}``.

        A mixture of stores says which store and which of its slots
        (:class:`loaders.store.selected.MixedStore`).
        """
        return {"index": index}

    def close(self) -> None:
        """Drop every streamed array's shard mappings (idempotent)."""
        for reader in self.streams.values():
            reader.close()


def _strip(path: str, message: str) -> str:
    return message[len(path) + 2 :] if message.startswith(f"{path}: ") else message


def _info(store: str | Path | Location | StoreInfo) -> StoreInfo:
    where = str(store.path if isinstance(store, StoreInfo) else store)
    try:
        if isinstance(store, StoreInfo):  # opened elsewhere: its arrays may have changed since
            info = store
            for name in info.layout.arrays:
                check_array_meta(info.path, info.layout, name)
        else:
            info = open_store_info(store)  # checks each array's metadata
    except pre.StoreMetadataError as exc:
        raise StoreMetadataError(where, _strip(where, str(exc))) from exc
    except pre.StoreError as exc:
        raise StoreOpenError(where, _strip(where, str(exc))) from exc
    return info


def _check_shard_files(info: StoreInfo) -> None:
    """Refuse a store with a shard file missing or of the wrong size (one listing)."""
    try:
        sizes = store_sizes(info.path)
    except OSError as exc:
        raise StoreOpenError(str(info.path), str(exc)) from exc
    for shard in range(info.layout.num_shards):
        for problem in shard_file_problems(
            info.path, info.layout, shard, sharded_names(info.layout), sizes
        ):
            raise StoreOpenError(str(info.path), problem)


def _reader(info: StoreInfo, name: str, shape: tuple[int, ...], **kw: Any) -> ShardedArrayReader:
    try:
        reader = ShardedArrayReader(info.path / name, name, complete=True, **kw)
    except UnsupportedArrayError as exc:
        raise StoreMetadataError(str(info.path), f"field '{name}': {exc}") from exc
    if reader.meta.shape != shape:
        raise StoreOpenError(
            str(info.path), f"field '{name}' has shape {reader.meta.shape}, layout says {shape}"
        )
    return reader


def open_store(
    store: str | Path | Location | StoreInfo,
    *,
    io: str = "auto",
    map_bytes: int = MAP_BYTES,
    verify: str = "first",
    cache: ReadCache | None = None,
) -> OpenedStore:
    """Validate ``store`` and return a :class:`OpenedStore`.

    Args:
        store: Store path, object-store URL (see ``docs/scale.md``) or its metadata.
        io: How streamed chunks (``image``, masks) are read: ``pread`` (through the kernel,
            straight into the batch rows), ``mmap`` (cached mappings of at most
            ``map_bytes`` of shard files, or of a read cache's entries) or ``auto``: ``mmap``
            when the streamed arrays' shard files fit in ``map_bytes`` (they then stay mapped),
            else ``pread``.
        map_bytes: Mapping budget for ``io="mmap"`` and ``"auto"``.
        verify: ``first`` (check each streamed chunk's crc32c on its first read, and again if
            its shard file changed) or ``always`` (on every read). Chunks fetched from object
            storage are checked on every read.
        cache: Local read-through cache of streamed chunks of a store in object storage.

    Raises:
        StoreOpenError: Incomplete store, another format version, a missing or malformed field,
            a shard file missing or of the wrong size (naming the file).
        StoreMetadataError: A ``zarr.json`` is cut or holds a key of a wrong type or value
            (naming the file and the key).
        CorruptChunkError: A chunk of an array read whole (labels, keypoints, extents,
            ``valid``) fails its checksum.
    """
    if io not in OPEN_IO_MODES:
        raise ValueError(f"io must be one of {OPEN_IO_MODES}, got {io!r}")
    info = _info(store)
    _check_shard_files(info)
    layout = info.layout
    axis = _variant_axis(info)
    names = [n for n in layout.arrays if n not in ("extent", "valid", "key")]
    streamed = [n for n in names if _streamed(layout.arrays[n], axis, size_hw(layout.size))]
    if io == "auto":  # the shard files' exact sizes: what the mapping budget counts
        shards = range(layout.num_shards)
        total = sum(expected_shard_size(layout, n, k) or 0 for n in streamed for k in shards)
        mappable = location(info.path).local or cache is not None  # shard files, cache entries
        io = "mmap" if total <= map_bytes and mappable else "pread"
    maps = MapCache(map_bytes) if io == "mmap" else None
    streams: dict[str, ShardedArrayReader] = {}
    small: dict[str, np.ndarray] = {}
    for name in names:
        a = layout.arrays[name]
        if name in streamed:
            streams[name] = _stream(info, a, io=io, maps=maps, verify=verify, cache=cache)
        else:
            small[name] = _reader(info, name, a.shape).read_all()
    extents = _extents(info)
    if layout.version == 1:
        small["label"] = small["label"].astype(np.int64)
        valid = small["label"] >= 0
    else:
        valid = _valid(info)
    return OpenedStore(info, streams, small, extents, valid, frozenset(axis))


def _variant_axis(info: StoreInfo) -> set[str]:
    """The arrays with a variant axis: every array of a spatial field, and ``extent``."""
    if info.layout.variants == 1:
        return set()
    out = {"extent"}
    for f in info.fields:
        if f.spatial:
            out |= {n for n in info.layout.arrays if n == f.name or n.startswith(f"{f.name}.")}
    return out


def _streamed(a: ArraySpec, axis: set[str], hw: tuple[int, int]) -> bool:
    """Stream an array in the image frame, or one whose samples are big; read the rest whole."""
    row = a.shape[1 + (a.name in axis) :]
    return row[:2] == hw or math.prod(row) * a.itemsize > SMALL_ROW_BYTES


def _stream(info: StoreInfo, a: ArraySpec, **kw: Any) -> ShardedArrayReader:
    reader = _reader(info, a.name, a.shape, **kw)
    if reader.meta.chunk_shape != a.chunk:
        raise StoreOpenError(
            str(info.path),
            f"{a.name} inner chunks {reader.meta.chunk_shape} are not whole samples {a.chunk}",
        )
    return reader


def _extents(info: StoreInfo) -> np.ndarray:
    """The stored extents, or the whole image for a store without spatial fields."""
    layout = info.layout
    if "extent" in layout.arrays:
        return _reader(info, "extent", layout.arrays["extent"].shape).read_all().astype(np.int32)
    out = np.zeros((layout.num_samples, 4), np.int32)
    out[:, 2:] = size_hw(layout.size)
    return out


def _valid(info: StoreInfo) -> np.ndarray:
    """A v2 store's ``valid`` array as a bool mask (values other than 0 and 1 refused)."""
    valid = _reader(info, "valid", (info.layout.num_samples,)).read_all()
    bad = np.flatnonzero(valid > 1)
    if len(bad):
        raise StoreOpenError(
            str(info.path),
            f"field 'valid' holds {int(valid[bad[0]])} at sample {int(bad[0])}; "
            "a sample is valid (1) or a hole (0)",
        )
    mask: np.ndarray = valid == 1
    return mask
