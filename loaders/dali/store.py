"""``DaliStoreLoader``: a nostall store streamed through a DALI augmentation pipeline.

The store is opened and validated by :func:`loaders.store.open_store.open_store`, as ``StoreLoader``
does (labels and extents read whole; image chunks read whole, crc-checked). A v2 store (named
fields) is served when its fields are an RGB ``image`` and an int64 ``label``, as a v1 store's
are; one with any other field is refused at construction, naming the fields. Image chunks are
kept in a small LRU cache sized to the shuffle window, so every chunk is read about once per
epoch; each batch's samples are gathered from the cached chunks and given to
``fn.external_source`` as one dense array.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from loaders.batching.order import variant_for_epoch
from loaders.contract import store_identity
from loaders.dali.base import DaliLoaderBase, Fetched
from loaders.dali.graph import GraphSpec
from loaders.errors import StoreOpenError
from loaders.selection import SampleTable
from loaders.store.open_store import OpenedStore, open_store
from loaders.store.selected import store_table
from precompute.fields import FieldSpec

__all__ = ["DaliStoreLoader", "refuse_unserved_fields"]


class _ChunkCache:
    """Whole ``image`` chunks by (chunk, variant), least recently used first out."""

    def __init__(self, source: OpenedStore, capacity: int) -> None:
        self._source, self.capacity = source, capacity
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    def get(self, chunk: int, variant: int) -> np.ndarray:
        """Return the (chunk_samples, S, S, 3) pixels of ``chunk`` in ``variant``."""
        key = (chunk, variant)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        img = self._source.image.read_chunk(self._source.chunk_coords(chunk, variant))
        img = img if self._source.layout.variants == 1 else img[:, 0]
        self._cache[key] = img
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return img


def _serves(field: FieldSpec, size: int) -> bool:
    """DALI's graph serves the RGB ``image`` and an int64 ``label``, nothing else."""
    st = field.storage(size)
    rgb = field.name == "image" and field.spec.photometric and st.shape == (size, size, 3)
    label = field.name == "label" and st.shape == () and st.dtype == "int64"
    return rgb or label


def refuse_unserved_fields(source: OpenedStore) -> None:
    """Refuse a store with a field the DALI graph cannot serve (never drop one silently).

    Raises:
        StoreOpenError: Naming every such field and its kind, and what serves them.
    """
    size = source.layout.size
    names = {f.name for f in source.fields}
    other = [f"{f.name!r} ({f.kind})" for f in source.fields if not _serves(f, size)]
    missing = [n for n in ("image", "label") if n not in names]
    if other or missing:
        raise StoreOpenError(
            str(source.info.path),
            f"DaliStoreLoader serves an RGB 'image' and an int64 'label' only; this store's "
            f"field(s) {', '.join(other) or 'none'} it cannot serve"
            + (f" and it lacks {missing}" if missing else "")
            + ": use StoreLoader, which serves every field",
        )


class DaliStoreLoader(DaliLoaderBase):
    """Stream a nostall store through DALI: random resized crop, flip, colour, normalise.

    Same contract as ``loaders.StoreLoader``: batches are dicts of torch tensors ``image``,
    ``label`` (``target`` with mixup) and ``index`` (store slot); the order is
    :func:`loaders.batching.order.epoch_order`; ``set_epoch``, ``len``, ``state_dict`` and
    ``load_state_dict`` (exact mid-epoch resume). Holes (skipped inputs) are never served.
    Stores with K variants serve variant :func:`loaders.batching.order.variant_for_epoch` each
    epoch.
    Crops are drawn inside each sample's valid extent (letterbox stores).

    Args:
        store: Path of a complete store.
        batch_size: Samples per batch.
        **kwargs: See :class:`loaders.dali.base.DaliLoaderBase` (augment, device, shuffle,
            seed, drop_last, rank, world_size, buffer_chunks, mixup, num_threads, prefetch).
            ``augment.size=None`` keeps the stored size.

    Raises:
        StoreOpenError: The store is incomplete, of another format version, or broken, or a
            v2 store has a field other than an RGB ``image`` and an int64 ``label`` (a mask,
            keypoints: the message names them; ``StoreLoader`` serves them).
        ImportError: DALI is not installed (``pip install 'nostall[dali]'``).
    """

    def __init__(self, store: str | Path, batch_size: int, **kwargs: Any) -> None:
        if isinstance(store, list):
            raise TypeError(
                "DaliStoreLoader serves one store; a mixture of stores (a list) is StoreLoader's"
            )
        source = open_store(store)
        try:
            refuse_unserved_fields(source)
            super().__init__(batch_size, **kwargs)
        except BaseException:
            source.close()
            raise
        self.source = source
        self.info = self.source.info
        self.num_samples = self.info.layout.num_samples
        self.chunk_samples = self.info.layout.chunk_samples
        self._chunks = _ChunkCache(self.source, 2 * self.buffer_chunks + 2)
        try:
            self._check_serves()
        except BaseException:
            source.close()
            raise

    def close(self) -> None:
        """Drop shard mappings and cached chunks (idempotent; the loader still reads after)."""
        self.source.close()
        self._chunks = _ChunkCache(self.source, self._chunks.capacity)

    def _data_identity(self) -> dict[str, Any]:
        return store_identity(self.info.spec_hash)

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        return None if self.source.valid.all() else self.source.valid

    def _sample_tables(self) -> list[SampleTable]:
        return [store_table(self.source)]

    def _graph(self) -> GraphSpec:
        stored = self.info.layout.size
        size = self.augment.size or stored
        keep = not self.augment.crops and size == stored  # nothing to crop or resize
        return self._graph_spec(None if keep else size, decode=False)

    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        variant = variant_for_epoch(self.seed, epoch, self.info.layout.variants)
        s = self.info.layout.size
        images = np.empty((len(indices), s, s, 3), np.uint8)
        chunk_of, row = np.divmod(indices, self.chunk_samples)
        for c in np.unique(chunk_of):  # chunk order does not matter: each is read whole
            sel = chunk_of == c
            images[sel] = self._chunks.get(int(c), variant)[row[sel]]
        extent = self.source.extents[indices]
        extent = extent if extent.ndim == 2 else extent[:, variant]
        return Fetched(
            data=images,
            hw=extent[:, 2:].astype(np.int64),
            offset=extent[:, :2].astype(np.int64),
            label=self.source.labels[indices],
            index=indices.astype(np.int64),
        )
