"""Open a store for streaming: validate it before the first batch and load its small arrays.

Labels and extents are a few bytes per sample, so they are read whole at open time (which also
yields the valid mask: holes have label -1). Only ``image`` is streamed chunk by chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaders.errors import StoreMetadataError, StoreOpenError, UnsupportedArrayError
from loaders.store.rawio import MapCache
from loaders.store.readcache import ReadCache
from loaders.store.shardio import ShardedArrayReader
from precompute import errors as pre
from precompute.format import StoreInfo, StoreLayout, open_store_info
from precompute.objstore import is_object_url, list_sizes
from precompute.storecheck import check_array_meta, shard_file_problems, sharded_names

__all__ = ["OpenedStore", "open_store"]


@dataclass(frozen=True)
class OpenedStore:
    """A validated store, ready to stream.

    Attributes:
        info: The store's metadata.
        image: Chunk reader of the ``image`` array.
        labels: All labels (N,), int64; -1 marks a hole.
        extents: All valid extents, (N, 4) or (N, K, 4) int32 ``(top, left, height, width)``.
        valid: Mask of real samples, ``labels >= 0``.
    """

    info: StoreInfo
    image: ShardedArrayReader
    labels: np.ndarray
    extents: np.ndarray
    valid: np.ndarray

    @property
    def layout(self) -> StoreLayout:
        """The store's layout."""
        return self.info.layout

    def chunk_coords(self, chunk: int, variant: int) -> tuple[int, ...]:
        """Return the ``image`` inner-chunk coordinates of sample chunk ``chunk``, ``variant``."""
        if self.layout.variants == 1:
            return (chunk, 0, 0, 0)
        return (chunk, variant, 0, 0, 0)


def _strip(path: str, message: str) -> str:
    return message[len(path) + 2 :] if message.startswith(f"{path}: ") else message


def _info(store: str | Path | StoreInfo) -> StoreInfo:
    where = str(store.path if isinstance(store, StoreInfo) else store)
    try:
        info = store if isinstance(store, StoreInfo) else open_store_info(store)
        for name in info.layout.arrays:
            check_array_meta(info.path, info.layout, name)
    except pre.StoreMetadataError as exc:
        raise StoreMetadataError(where, _strip(where, str(exc))) from exc
    except pre.StoreError as exc:
        raise StoreOpenError(where, _strip(where, str(exc))) from exc
    return info


def _check_shard_files(info: StoreInfo) -> None:
    """Refuse a store with a shard file missing or of the wrong size.

    One ``stat`` per file; one listing of an object store.
    """
    sizes = None
    if is_object_url(info.path):
        try:
            sizes = list_sizes(str(info.path))
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
    store: str | Path | StoreInfo,
    *,
    io: str = "pread",
    map_bytes: int = 256 << 20,
    verify: str = "first",
    cache: ReadCache | None = None,
) -> OpenedStore:
    """Validate ``store`` and return a :class:`OpenedStore`.

    Args:
        store: Store path, ``s3://`` URL (see ``docs/scale.md``) or its metadata.
        io: How ``image`` chunks are read: ``pread`` (through the kernel, straight into the
            batch rows) or ``mmap`` (cached mappings of at most ``map_bytes`` of shard files).
        map_bytes: Mapping budget for ``io="mmap"``.
        verify: ``first`` (check each image chunk's crc32c on its first read, and again if
            its shard file changed) or ``always`` (on every read). Chunks from object storage
            are checked on every read.
        cache: Local read-through cache of ``image`` chunks of an ``s3://`` store.

    Raises:
        StoreOpenError: Incomplete store, another format version, a missing or malformed field,
            a shard file missing or of the wrong size (naming the file).
        StoreMetadataError: A ``zarr.json`` is cut or holds a key of a wrong type or value
            (naming the file and the key).
        CorruptChunkError: A label or extent chunk fails its checksum.
    """
    info = _info(store)
    _check_shard_files(info)
    layout = info.layout
    maps = MapCache(map_bytes) if io == "mmap" else None
    image = _reader(info, "image", layout.image_shape, io=io, maps=maps, verify=verify, cache=cache)
    if image.meta.chunk_shape != layout.image_chunk:
        raise StoreOpenError(
            str(info.path),
            f"image inner chunks {image.meta.chunk_shape} are "
            f"not whole samples {layout.image_chunk}",
        )
    labels = _reader(info, "label", (layout.num_samples,)).read_all().astype(np.int64)
    extents = _reader(info, "extent", layout.extent_shape).read_all().astype(np.int32)
    return OpenedStore(info, image, labels, extents, labels >= 0)
