"""``DaliStoreLoader``: a nostall store streamed through a DALI augmentation pipeline.

Whole inner chunks are read with :class:`loaders.shardio.ShardedArrayReader` (one ``pread``
each, crc-checked) and kept in a small LRU cache sized to the shuffle window, so every chunk is
read about once per epoch; the batch's samples are gathered from the cached chunks and given to
``fn.external_source`` as one dense array.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from loaders.dali.base import DaliLoaderBase, Fetched
from loaders.dali.graph import GraphSpec
from loaders.errors import StoreOpenError
from loaders.order import variant_for_epoch
from loaders.shardio import ShardedArrayReader

__all__ = ["DaliStoreLoader"]


def _open_info(store: str | Path) -> Any:
    from precompute.errors import PrecomputeError
    from precompute.format import open_store_info

    try:
        return open_store_info(store)
    except PrecomputeError as exc:
        raise StoreOpenError(str(store), str(exc)) from exc


class _ChunkCache:
    """Whole chunks of ``image`` and ``extent`` for one variant, least recently used first out."""

    def __init__(self, root: Path, variants: int, capacity: int) -> None:
        self._image = ShardedArrayReader(root / "image", "image")
        self._extent = ShardedArrayReader(root / "extent", "extent")
        self._variants, self._capacity = variants, capacity
        self._cache: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def get(self, chunk: int, variant: int) -> tuple[np.ndarray, np.ndarray]:
        key = (chunk, variant)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if self._variants == 1:
            img, ext = self._image.read_chunk((chunk, 0, 0, 0)), self._extent.read_chunk((chunk, 0))
        else:
            img = self._image.read_chunk((chunk, variant, 0, 0, 0))[:, 0]
            ext = self._extent.read_chunk((chunk, 0, 0))[:, variant]
        self._cache[key] = (img, ext)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return img, ext


class DaliStoreLoader(DaliLoaderBase):
    """Stream a nostall store through DALI: random resized crop, flip, colour, normalise.

    Same contract as ``loaders.StoreLoader``: batches are dicts of torch tensors ``image``
    (B, 3, H, W), ``label`` (B,) int64 and ``index`` (B,) int64 (store slot); the order is
    :func:`loaders.order.epoch_order`; ``set_epoch``, ``len``, ``state_dict`` and
    ``load_state_dict`` (exact mid-epoch resume). Holes (skipped inputs) are never served.
    Stores with K variants serve variant :func:`loaders.order.variant_for_epoch` each epoch.

    Args:
        store: Path of a complete store.
        batch_size: Samples per batch.
        **kwargs: See :class:`loaders.dali.base.DaliLoaderBase` (augment, device, shuffle,
            seed, drop_last, rank, world_size, buffer_chunks, mixup, num_threads, prefetch).
            ``augment.size=None`` keeps the stored size.

    Raises:
        StoreOpenError: The store is incomplete, of another format version, or broken.
        ImportError: DALI is not installed (``pip install 'nostall[dali]'``).
    """

    def __init__(self, store: str | Path, batch_size: int, **kwargs: Any) -> None:
        super().__init__(batch_size, **kwargs)
        self.info = _open_info(store)
        layout = self.info.layout
        self.num_samples, self.chunk_samples = layout.num_samples, layout.chunk_samples
        self._labels = ShardedArrayReader(Path(store) / "label", "label").read_all()
        self._mask = self._labels >= 0
        self._chunks = _ChunkCache(Path(store), layout.variants, 2 * self.buffer_chunks + 2)

    def _identity(self) -> dict[str, Any]:
        return {**super()._identity(), "spec_hash": self.info.spec_hash}

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        return None if self._mask.all() else self._mask

    def _graph(self) -> GraphSpec:
        stored = self.info.layout.size
        size = self.augment.size or stored
        keep = not self.augment.crops and size == stored  # nothing to crop or resize
        return self._graph_spec(None if keep else size, decode=False)

    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        variant = variant_for_epoch(self.seed, epoch, self.info.layout.variants)
        s = self.info.layout.size
        images = np.empty((len(indices), s, s, 3), np.uint8)
        extent = np.empty((len(indices), 4), np.int64)
        chunk_of, row = np.divmod(indices, self.chunk_samples)
        for c in np.unique(chunk_of):  # chunk order does not matter: each is read whole
            img, ext = self._chunks.get(int(c), variant)
            sel = chunk_of == c
            images[sel], extent[sel] = img[row[sel]], ext[row[sel]]
        return Fetched(data=images, hw=extent[:, 2:], offset=extent[:, :2],
                       label=self._labels[indices], index=indices.astype(np.int64))
