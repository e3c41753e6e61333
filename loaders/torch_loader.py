"""StoreLoader: a nostall store as an iterable of batches on the device.

The chain (each a node with next/reset/state)::

    BatchReader (whole chunks, routed into batches) -> Prefetcher(prefetch) -> ToDevice

then, on the training thread, ``augment`` and ``mixup`` with the batch's generator
(:meth:`loaders.contract.ContractLoader.batch_generator`). The order, the variant and the
augmentation randomness are all pure functions of (seed, epoch, rank, batch), so the state of
a run is just ``(epoch, batch)``: the batch is the chain's own state (``get_state``) after the
last batch handed out, and resuming from it replays the rest of the epoch exactly. Settings,
epochs, plans and the resume state are the contract's (:class:`loaders.contract.ContractLoader`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from loaders.augment.arrays.policy import bind_band_stats
from loaders.augment.audio.policy import AudioAugment
from loaders.augment.fields import check_field_policies
from loaders.batching.nodes import Node
from loaders.batching.order import variant_for_epoch
from loaders.batching.plan import EpochPlan
from loaders.batching.prefetch import Prefetcher
from loaders.batching.reader import BatchReader, stream_pools
from loaders.cacheref import Held, is_cache_ref, resolve_cache_ref
from loaders.contract import (
    ContractLoader,
    Mixup,
    check_int,
    store_identity,
)
from loaders.errors import LoaderError
from loaders.selection import Choice, SampleTable, Split
from loaders.store.open_store import MAP_BYTES, OPEN_IO_MODES, OpenedStore, open_store
from loaders.store.ramrows import load_rows
from loaders.store.readcache import ReadCache
from loaders.store.selected import MixedStore, mix_stores, store_table
from loaders.transfer.device import ToDevice
from loaders.transfer.devicedecode import device_decoders, jpeg_route
from loaders.transfer.dtype import check_dtype, float_scales, to_dtype
from precompute.fields import v1_fields
from precompute.format.layout import StoreInfo

__all__ = ["StoreLoader"]

LOADER_IO_MODES = (*OPEN_IO_MODES, "ram")  # "ram": loaders.store.ramrows

Augment = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


class StoreLoader(ContractLoader):
    """Stream a nostall store as batches of tensors on ``device``.

    Args:
        store: Store path, ``s3://`` URL, a :class:`precompute.format.layout.StoreInfo`, or a cache
            reference: a cache key, a ``(source, spec)`` pair or ``{"source": ..., "spec":
            ...}``, resolved (built at most once) through the installed store resolver
            (:func:`service.resolve`) and leased while open. A list of them: a mixture of
            stores with the same fields, in ``proportions``.
        batch_size: Samples per batch (per rank).
        device: Where batches live: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a torch.device.
        shuffle: Shuffle chunks, then samples inside windows of ``buffer_chunks`` chunks.
        seed: Seed of the order, the variant choice and the augmentation randomness.
        drop_last: Leave out the last, smaller batch of an epoch, and even out the ranks by
            leaving out the last ``total % world_size`` samples of the epoch's sequence.
            False serves every sample: ranks are evened out with fewer than ``world_size``
            repeats, marked ``is_pad`` (evaluation: drop them from metrics).
        augment: ``augment(images_u8_nhwc, extents_int32, generator) -> images`` on the device;
            for a v2 store (named fields) ``augment.apply_fields(values, fields, extents,
            generator) -> values`` (``TrainAugment`` and ``EvalAugment`` have both; an audio
            store takes ``AudioAugment``, which mixes too: see ``docs/audio.md``).
        mixup: ``mixup(images, labels_int64, generator) -> (images, soft_targets)``; for a v2
            store ``mixup.apply_fields(values, fields, generator) -> values`` (``Mixup``).
        rank: This process's rank; default from torch.distributed or ``RANK``.
        world_size: Number of ranks; default from torch.distributed or ``WORLD_SIZE``.
        buffer_chunks: Chunks per shuffle window. Host batch buffers are reused: at most
            ``prefetch + 3 + ceil(buffer_chunks * chunk_samples / batch_size)`` are kept (3
            more on CUDA, pinned), i.e. one window of batches being filled plus the finished
            ones waiting (more where the first epoch's plan fills more at once: weighted
            draws, a mixture per batch); a batch the caller keeps is never overwritten.
        prefetch: Batches prepared ahead on a background thread; 0 reads on the calling
            thread (no background thread: for CPU training on a machine without spare cores).
        num_threads: Parallel chunk reads.
        io: ``auto`` (default): ``mmap`` when the streamed arrays' shard files fit in
            ``map_bytes`` (they then stay mapped: each chunk is copied out of page tables
            already set up), else ``pread``. ``pread``: one ``preadv`` per chunk straight
            into the batch rows; no mapped pages, so RSS holds the batch buffers alone (see
            ``buffer_chunks``). ``mmap``: shard files stay mapped, up to ``map_bytes`` of
            them, which count in RSS (``benchmarks.suite.loader`` prints each). ``ram``: every
            streamed array is read once, at open, into one block of rows in this process's
            memory (crc32c checked), and each batch is one gather per array, as from a memmap:
            fastest for small samples (spectral patches), but RSS holds the whole store (up to
            ``map_bytes``; each rank its own copy) and a store with variants is refused.
        map_bytes: Budget of mapped shard-file bytes for ``io="mmap"`` and ``"auto"``; mapped
            file pages count in RSS, so RSS stays below about this plus the batch buffers.
            With ``io="ram"``, the most bytes read into memory (more raises ``LoaderError``).
        verify: ``first`` checks each image chunk's crc32c on its first read in this process
            and again whenever its shard file changed (inode, size, mtime), so no byte is
            served unchecked while later epochs from a hot page cache skip the re-check;
            ``always`` checks every chunk on every read.
        cache_root: Cache root for a cache reference (default ``$NOSTALL_CACHE`` or
            ``~/.cache/nostall``).
        cache: A :class:`service.Cache` to resolve a cache reference with, instead.
        read_cache: For an ``s3://`` store: a :class:`~loaders.store.readcache.ReadCache` on
            local disk that image chunks are read through (``docs/scale.md``).
        keys: Add ``key`` to every batch: a list of each sample's source key (its path
            relative to the source root, or a manifest's key; ``""`` for a hole), to map a
            sample back to its file. Read once, when the loader opens.
        dtype: None: every entry as stored (or as the policies return it). ``"float32"``,
            ``"bfloat16"`` or ``"float16"``: the images, audio and arrays in that dtype, last
            (uint8 images to [0, 1], int16 waveforms to [-1, 1), floats cast; an augment's
            own float dtype must agree): :mod:`loaders.transfer.dtype`.
        subset, split, splits, weights, balance, repeat_factor, replacement,
            samples_per_epoch, proportions, mix: Which samples an epoch serves and how often
            (:class:`loaders.selection.Choice`; ``docs/loaders.md``, "Choosing samples"):
            a subset (indices, a mask, a predicate over the stored fields and keys), a named
            split, weighted or class-balanced draws, repeat factors, a mixture's proportions
            per batch or per epoch.
        jpeg_decoder: Where a field stored with the ``jpeg`` codec is decoded: ``auto``
            (default) on a CUDA ``device`` by nvImageCodec, batched, where it is installed,
            else on the reader threads (libjpeg-turbo); ``device`` there or a ``ValueError``
            saying why not; ``reader`` on the reader threads always
            (:mod:`loaders.transfer.devicedecode`).

    Yields:
        Dicts with ``image`` (uint8 NHWC without augment, else what augment returns),
        ``label`` (int64; ``target`` with mixup instead), ``index`` (int64) and ``is_pad``
        (bool: True on a repeat that only evens out the ranks), on ``device``. A v2 store's
        dicts hold one entry per field (and companion) instead of ``image`` and ``label``:
        as stored without augment, else as ``apply_fields`` returns them
        (``docs/loaders.md``, "Stores with named fields").

    Raises:
        StoreOpenError: The store is incomplete, of another format version or lacks a field.
        StoreMetadataError: A ``zarr.json`` of the store does not parse or has a missing or
            invalid key (the message names the file and the key).
        CorruptChunkError: While iterating: a chunk fails its crc32c check, or a shard file
            of the complete store is missing, cut short or of the wrong size (the message
            names the shard file; never served as fill values).
        ValueError: A setting is out of range (the message names it and its value), or a
            v2 store's augment or mixup lacks ``apply_fields``.
        AugmentError: A mixup policy would blend or paste a field whose kind refuses it.
    """

    def __init__(
        self,
        store: str | Path | StoreInfo | tuple[Any, Any] | Mapping[str, Any] | list[Any],
        batch_size: int,
        *,
        device: str | torch.device = "cpu",
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
        augment: Augment | AudioAugment | None = None,
        mixup: Mixup | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        buffer_chunks: int = 8,
        prefetch: int = 2,
        num_threads: int = 2,
        io: str = "auto",
        map_bytes: int = MAP_BYTES,
        verify: str = "first",
        cache_root: str | Path | None = None,
        cache: Any = None,
        read_cache: ReadCache | None = None,
        keys: bool = False,
        dtype: str | None = None,
        subset: Any = None,
        split: str | None = None,
        splits: Split | None = None,
        weights: Any = None,
        balance: str | None = None,
        repeat_factor: float | None = None,
        replacement: bool = True,
        samples_per_epoch: int | None = None,
        proportions: Sequence[float] | None = None,
        mix: str = "batch",
        jpeg_decoder: str = "auto",
    ) -> None:
        choice = Choice(
            subset, split, splits, weights, balance, repeat_factor, replacement,
            samples_per_epoch, proportions, mix,
        )  # fmt: skip
        super().__init__(
            batch_size,
            device=device,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            rank=rank,
            world_size=world_size,
            buffer_chunks=buffer_chunks,
            choice=choice,
        )
        self.prefetch = check_int("prefetch", prefetch, 0)
        self.num_threads = check_int("num_threads", num_threads, 1)
        self.augment, self.mixup = augment, mixup
        self.jpeg_decoder = jpeg_decoder
        self._device_jpeg = jpeg_route(jpeg_decoder, self.device, ram=io == "ram")
        self._dtype = check_dtype(dtype, augment)
        self.dtype = dtype
        self._leases: list[Held] = []
        self._leased: str | None = None  # the store the cache resolved (and leased), if any
        self._closed = False
        stores = list(store) if isinstance(store, list) else [store]
        try:
            paths = [self._resolve(s, cache_root, cache) for s in stores]
            self._open(paths, io=io, map_bytes=map_bytes, verify=verify, read_cache=read_cache)
            self._keys = self._key_lists() if keys else None
        except BaseException:
            self._release()  # a loader that was never made holds no lease
            raise

    def _resolve(self, store: object, cache_root: str | Path | None, cache: Any) -> object:
        """``store``, or the store a cache reference resolves to (leased while open)."""
        if not is_cache_ref(store):
            return store
        path, lease = resolve_cache_ref(store, cache_root=cache_root, cache=cache)
        self._leases.append(lease)
        self._leased = str(path)
        return path

    def _open(
        self,
        stores: list[object],
        *,
        io: str,
        map_bytes: int,
        verify: str,
        read_cache: ReadCache | None,
    ) -> None:
        """Open and check the stores, allocate the batch buffers and plan the first epoch."""
        paths: list[str | Path | StoreInfo] = []
        for store in stores:
            if isinstance(store, (str, Path, StoreInfo)):
                paths.append(store)
            else:
                raise TypeError(
                    f"store must be a path, a StoreInfo or a cache reference (or a list of them: "
                    f"a mixture): {store!r}"
                )
        if io not in LOADER_IO_MODES:
            raise ValueError(f"io must be one of {LOADER_IO_MODES}, got {io!r}")
        ram = io == "ram"
        if ram and len(stores) > 1:
            raise ValueError("io='ram' holds one store in memory; a mixture streams its stores")
        opened: list[OpenedStore] = []
        try:
            for path in paths:
                opened.append(
                    open_store(
                        path, io="pread" if ram else io, map_bytes=map_bytes, verify=verify,
                        cache=read_cache,
                    )
                )  # fmt: skip
            self.source = opened[0] if len(opened) == 1 else mix_stores(opened)
        except BaseException:
            for source in opened:
                source.close()
            raise
        self._rows = load_rows(self.source, map_bytes) if ram else None
        layout = self.source.layout
        self.num_samples, self.chunk_samples = layout.num_samples, layout.chunk_samples
        # JPEG fields decoded on a CUDA device, batched (jpeg_decoder; never with io="ram")
        self._decoders = device_decoders(self.source, self.device) if self._device_jpeg else {}
        self.fields = self.source.fields if layout.version == 2 else ()
        self._scales = float_scales(self.fields or v1_fields())
        check_field_policies(self.fields, self.augment, self.mixup)
        report = self.source.info.report
        self.augment = bind_band_stats(self.augment, self.fields, report)
        bind = getattr(self.augment, "bind_store", None)  # a policy taking the store's stats
        if callable(bind):
            self.augment = bind(self.fields, report)
        self._check_serves()  # bad rank/world/chunk/batch combinations raise before a batch
        window, bs = self.buffer_chunks * layout.chunk_samples, self.batch_size
        cuda = self.device.type == "cuda"  # pinned: ToDevice copies batches without staging
        # the batches the reader fills at once: one window's, or more where windows hold
        # more (weighted draws) or interleave (a mixture per batch)
        filling = max(-(-window // bs), self.plan().open_batches(bs))
        keep = self.prefetch + 3 + filling + (ToDevice.SLOTS if cuda else 0)
        self._buffers = stream_pools(self.source, bs, keep, pin=cuda)

    def _valid(self) -> npt.NDArray[np.bool_]:
        return self.source.valid

    def _key_lists(self) -> list[list[str]]:
        """Each store's keys (one list; a mixture's, one per store)."""
        parts = self.source.parts if isinstance(self.source, MixedStore) else (self.source,)
        return [part.keys() for part in parts]

    def _batch_keys(self, batch: Mapping[str, torch.Tensor]) -> list[str]:
        keys, index = self._keys or [], batch["index"].tolist()
        stores = batch["store"].tolist() if "store" in batch else [0] * len(index)
        return [keys[s][i] for s, i in zip(stores, index, strict=True)]

    def _sample_tables(self) -> list[SampleTable]:
        parts = self.source.parts if isinstance(self.source, MixedStore) else (self.source,)
        return [store_table(part) for part in parts]

    def _sample_space(self) -> tuple[int, int, list[npt.NDArray[np.int64]]]:
        if isinstance(self.source, MixedStore):
            return self.num_samples, self.chunk_samples, list(self.source.slots)
        return super()._sample_space()

    def _data_identity(self) -> dict[str, Any]:
        return store_identity(self.source.info.spec_hash)

    @property
    def io(self) -> str | None:
        """How batches are read now: ``ram``, ``pread`` or ``mmap`` (None: nothing streams).

        ``ram`` while ``io="ram"`` holds every row in memory (read once when the loader
        opened); else the shards' reads. A store of small fields only streams nothing: its
        values are read whole when it opens.
        """
        if self._rows is not None:
            return "ram"
        streamed = next(iter(self.source.streams.values()), None)  # a v2 store may have no image
        return None if streamed is None else str(streamed.io)

    def variant(self, epoch: int | None = None) -> int:
        """Return the stored variant served in ``epoch`` (0 without variants)."""
        epoch = self._epoch if epoch is None else epoch
        return variant_for_epoch(self.seed, epoch, self.source.layout.variants)

    def _pipeline(self, plan: EpochPlan, variant: int) -> Node[dict[str, torch.Tensor]]:
        reader = BatchReader(
            self.source,
            plan,
            self.batch_size,
            self.drop_last,
            variant,
            self.num_threads,
            self._buffers,
            self._rows,
        )
        feed = reader if self.prefetch == 0 else Prefetcher(reader, self.prefetch, "nostall-read")
        return ToDevice(feed, self.device, decoders=self._decoders)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Yield the batches of the current epoch, then advance the epoch.

        A new iteration starts the epoch from its first batch, except right after
        :meth:`load_state_dict`, which resumes at the saved batch once. Handing out the last
        batch completes the pass and advances the epoch by one (the iterator need not be run
        to its end), so calling :meth:`set_epoch` each epoch is optional; an iteration broken
        off ends its epoch too, and the next one serves the next epoch. An iteration still
        live when a new one starts (or :meth:`set_epoch`, :meth:`load_state_dict` is called)
        serves nothing more: the state follows the newest only.
        """
        if self._closed and self._leased is not None:
            raise LoaderError(
                f"this StoreLoader was closed: its cache lease on {self._leased} was released, "
                "so the cache may evict that store at any time; make a new StoreLoader to read "
                "it again"
            )
        epoch, start, total = self._begin_pass()
        mine = self._pass
        if start >= total:
            return
        plan = self.plan(epoch)
        pipeline = self._pipeline(plan, self.variant(epoch))
        try:
            pipeline.reset({"batch": start})
            for host in pipeline:
                if self._superseded(mine):  # a newer iteration (or set_epoch) took over
                    return
                served = int(pipeline.get_state()["batch"])  # batches handed out so far
                batch = self._finish(host, epoch, served - 1)
                if self._keys is not None:  # each sample's source key, a list of str
                    batch["key"] = self._batch_keys(batch)  # type: ignore[assignment]
                self._mark_served(epoch, served, total)
                yield batch
        finally:
            pipeline.close()

    def _finish(
        self, batch: dict[str, torch.Tensor], epoch: int, number: int
    ) -> dict[str, torch.Tensor]:
        """One host batch served: :meth:`_policies`, then the loader's ``dtype``."""
        return to_dtype(self._policies(batch, epoch, number), self._scales, self._dtype)

    def _policies(
        self, batch: dict[str, torch.Tensor], epoch: int, number: int
    ) -> dict[str, torch.Tensor]:
        """One host batch's arrays (``extent`` dropped), augmented and mixed.

        One generator per batch (:meth:`batch_generator`) draws for both policies. A v2
        store's fields go through ``apply_fields`` (every field by its kind); a v1 store's
        ``image`` + ``label`` through the policies' image calls (``mixup`` turns ``label``
        into ``target``).
        """
        out = {k: v for k, v in batch.items() if k != "extent"}
        if not self.fields:  # a v1 store: its profile's fields first (image, label)
            out = {**{f.name: out.pop(f.name) for f in v1_fields()}, **out}
        if self.augment is None and self.mixup is None:
            return out
        gen = self.batch_generator(epoch, number)
        if self.fields:
            if self.augment is not None:
                out = self.augment.apply_fields(out, self.fields, batch["extent"], gen)  # type: ignore[union-attr]
            if self.mixup is not None:
                out = self.mixup.apply_fields(out, self.fields, gen)  # type: ignore[attr-defined]
            return out
        if self.augment is not None:
            out["image"] = self.augment(out["image"], batch["extent"], gen)  # type: ignore[arg-type,call-arg,assignment]
        if self.mixup is not None:
            out["image"], out["target"] = self.mixup(out["image"], out.pop("label"), gen)
        return out

    def close(self) -> None:
        """Drop shard mappings and release the cache lease, if any (idempotent).

        A loader of a store on disk can be iterated again after; one the cache resolved
        cannot (its store is no longer leased: the cache may evict it meanwhile), and says so.
        """
        self.source.close()
        self._rows = None  # io="ram": a later iteration reads chunks (the same batches)
        self._closed = True
        self._release()

    def _release(self) -> None:
        while self._leases:
            self._leases.pop().release()
