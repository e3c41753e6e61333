"""``DaliStoreLoader``: a nostall store streamed through a DALI augmentation pipeline.

The store is opened and validated by :func:`loaders.store.open_store.open_store`, as ``StoreLoader``
does (labels and extents read whole; image chunks read whole, crc-checked). A v2 store (named
fields) is served when its fields are an RGB ``image`` and an int64 ``label``, as a v1 store's
are; one with any other field is refused at construction, naming the fields. Image chunks are
kept in a small LRU cache sized to the shuffle window, so every chunk is read about once per
epoch; each batch's samples are gathered from the cached chunks and given to
``fn.external_source`` as one dense array. A store whose ``image`` is stored with the ``jpeg``
codec (``docs/FORMAT.md``, "Codecs") is decoded by DALI's own decoder from its stored streams
(``jpeg_decoder="auto"`` with a GPU: the ``mixed`` decoder, on the GPU's hardware JPEG engine
where one exists, ROI-decoding only each crop), or by the reader (libjpeg-turbo) into pixels as
any other store's (``auto`` without a GPU, or ``"reader"``); augmentation follows as today.
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
from precompute.checks import Size, size_hw
from precompute.fields import FieldSpec

__all__ = ["DaliStoreLoader", "refuse_unserved_fields"]


JPEG_DECODERS = ("auto", "dali", "reader")


class _ChunkCache:
    """Whole ``image`` chunks by (chunk, variant), least recently used first out.

    With ``streams``, a chunk is the list of its samples' JPEG streams (an image of fill values,
    stored as no stream, as ``fill``'s stream), for DALI's decoder.
    """

    def __init__(self, source: OpenedStore, capacity: int, streams: bytes | None = None) -> None:
        self._source, self.capacity, self._fill = source, capacity, streams
        self._cache: OrderedDict[tuple[int, int], Any] = OrderedDict()

    def _streams(self, coords: tuple[int, ...]) -> list[np.ndarray]:
        from precompute.format.codecs.jpeg import split_streams

        data = self._source.image.read_stored(coords)
        rows = self._source.layout.chunk_samples
        return [
            np.frombuffer(s if len(s) else self._fill or b"", np.uint8)
            for s in split_streams(data, rows)
        ]

    def get(self, chunk: int, variant: int) -> Any:
        """Return the (chunk_samples, S, S, 3) pixels of ``chunk`` in ``variant`` (or streams)."""
        key = (chunk, variant)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        coords = self._source.chunk_coords(chunk, variant)
        if self._fill is not None:
            img: Any = self._streams(coords)
        else:
            img = self._source.image.read_chunk(coords)
            img = img if self._source.layout.variants == 1 else img[:, 0]
        self._cache[key] = img
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return img


def _serves(field: FieldSpec, size: Size) -> bool:
    """DALI's graph serves the RGB uint8 ``image`` and an int64 ``label``, nothing else."""
    st = field.storage(size)
    rgb = (
        field.name == "image"
        and field.spec.photometric
        and st.shape == (*size_hw(size), 3)
        and st.dtype == "uint8"
    )
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
            f"DaliStoreLoader serves an RGB uint8 'image' and an int64 'label' only; this "
            f"store's "
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

    def __init__(
        self, store: str | Path, batch_size: int, *, jpeg_decoder: str = "auto", **kwargs: Any
    ) -> None:
        if isinstance(store, list):
            raise TypeError(
                "DaliStoreLoader serves one store; a mixture of stores (a list) is StoreLoader's"
            )
        source = open_store(store)
        try:
            refuse_unserved_fields(source)
            super().__init__(batch_size, **kwargs)
            self._fill = self._dali_streams(source, jpeg_decoder)
        except BaseException:
            source.close()
            raise
        self.source = source
        self.info = self.source.info
        self.num_samples = self.info.layout.num_samples
        self.chunk_samples = self.info.layout.chunk_samples
        self._chunks = _ChunkCache(self.source, 2 * self.buffer_chunks + 2, self._fill)
        try:
            self._check_serves()
        except BaseException:
            source.close()
            raise

    def _dali_streams(self, source: OpenedStore, decoder: str) -> bytes | None:
        """The stream of a fill image when DALI decodes a ``jpeg`` image array, else None."""
        if decoder not in JPEG_DECODERS:
            raise ValueError(f"jpeg_decoder must be one of {JPEG_DECODERS}, got {decoder!r}")
        codec = source.image.meta.codec
        if codec is None or codec.name != "jpeg" or decoder == "reader":
            return None
        if decoder == "auto" and self._device_id is None:
            return None  # no GPU: libjpeg-turbo in the reader, as fast as DALI's CPU decoder
        fill = np.full((1, *size_hw(source.layout.size), 3), source.image.meta.fill_value, np.uint8)
        fill[0, 0, 0, 0] ^= 1  # one value off the fill: an image with a stream
        from precompute.format.codecs.jpeg import split_streams

        data = codec.codec.encode(fill, codec.options, source.image.meta.fill_value)
        return bytes(split_streams(data, 1)[0])

    def close(self) -> None:
        """Drop shard mappings and cached chunks (idempotent; the loader still reads after)."""
        self.source.close()
        self._chunks = _ChunkCache(self.source, self._chunks.capacity, self._fill)

    def _data_identity(self) -> dict[str, Any]:
        return store_identity(self.info.spec_hash)

    def _valid(self) -> npt.NDArray[np.bool_] | None:
        return None if self.source.valid.all() else self.source.valid

    def _sample_tables(self) -> list[SampleTable]:
        return [store_table(self.source)]

    def _graph(self) -> GraphSpec:
        h, w = size_hw(self.info.layout.size)
        size = self.augment.size or h
        if self.augment.size is None and h != w:
            raise StoreOpenError(
                str(self.info.path),
                f"the store's frame is {w}x{h} and DALI's outputs are square: give the augment "
                "a size (it crops and resizes into it)",
            )
        keep = not self.augment.crops and (size, size) == (h, w)  # nothing to crop or resize
        streams = self._fill is not None  # jpeg streams for DALI's decoder
        return self._graph_spec(None if keep and not streams else size, decode=streams)

    def _fetch(self, epoch: int, batch: int, indices: npt.NDArray[np.int64]) -> Fetched:
        variant = variant_for_epoch(self.seed, epoch, self.info.layout.variants)
        hw = size_hw(self.info.layout.size)
        chunk_of, row = np.divmod(indices, self.chunk_samples)
        images: Any
        if self._fill is not None:  # streams, in the batch's order
            images = [
                self._chunks.get(int(c), variant)[int(r)]
                for c, r in zip(chunk_of, row, strict=True)
            ]
        else:
            images = np.empty((len(indices), *hw, 3), np.uint8)
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
