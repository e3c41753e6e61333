"""StoreLoader: a nostall store as an iterable of batches on the device.

The chain (each a node with next/reset/state)::

    BatchReader (whole chunks, routed into batches) -> Prefetcher(prefetch) -> ToDevice

then, on the training thread, ``augment`` and ``mixup`` with a ``torch.Generator`` seeded by
:func:`loaders.order.batch_seed` of (seed, epoch, rank, batch). The order, the variant and the
augmentation randomness are all pure functions of those numbers, so the state of a run is just
``(epoch, batch)`` and resuming from it replays the rest of the epoch exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from loaders.buffers import BufferPool
from loaders.device import ToDevice
from loaders.errors import DeviceUnavailableError, LoaderError
from loaders.nodes import Node
from loaders.order import batch_seed, variant_for_epoch
from loaders.plan import EpochPlan, epoch_plan
from loaders.prefetch import Prefetcher
from loaders.readcache import ReadCache
from loaders.reader import BatchReader
from loaders.source import open_source
from precompute.format import StoreInfo

__all__ = ["StoreLoader", "resolve_device", "resolve_rank"]

Augment = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
Mixup = Callable[[torch.Tensor, torch.Tensor, torch.Generator], tuple[torch.Tensor, torch.Tensor]]
_STATE_KEYS = ("seed", "world_size", "rank", "batch_size", "shuffle", "drop_last",
               "buffer_chunks", "spec_hash")


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Return (rank, world_size): from the arguments, else torch.distributed, else torchrun env.

    Raises:
        ValueError: Only one of the two given, or rank outside ``[0, world_size)``.
    """
    if (rank is None) != (world_size is None):
        raise ValueError(f"give both rank and world_size or neither, got {rank=} {world_size=}")
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            rank = int(os.environ.get("RANK", 0))
            world_size = int(os.environ.get("WORLD_SIZE", 1))
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    return rank, world_size


def _is_cache_ref(store: object) -> bool:
    """True for a cache key (64 hex digits, not an existing path), (source, spec) or a mapping."""
    if isinstance(store, (tuple, Mapping)):
        return True
    return (isinstance(store, str) and len(store) == 64 and not Path(store).exists()
            and all(c in "0123456789abcdef" for c in store))


def resolve_device(device: str | torch.device) -> torch.device:
    """Return ``device`` with a CUDA index pinned now (``"cuda"`` -> the current GPU).

    Pinning at construction keeps every later allocation, copy and generator on the GPU that
    was current when the loader was built, even if the caller switches devices afterwards.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"device {device!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _positive(name: str, value: int, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


class StoreLoader:
    """Stream a nostall store as batches of tensors on ``device``.

    Args:
        store: Store path, ``s3://`` URL, a :class:`precompute.format.StoreInfo`, or a cache
            reference: a cache key, a ``(source, spec)`` pair or ``{"source": ..., "spec":
            ...}``, resolved (built at most once) through :func:`service.resolve` and leased
            while open.
        batch_size: Samples per batch (per rank).
        device: Where batches live: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a torch.device.
        shuffle: Shuffle chunks, then samples inside windows of ``buffer_chunks`` chunks.
        seed: Seed of the order, the variant choice and the augmentation randomness.
        drop_last: Leave out the last, smaller batch of an epoch.
        augment: ``augment(images_u8_nhwc, extents_int32, generator) -> images`` on the device.
        mixup: ``mixup(images, labels_int64, generator) -> (images, soft_targets)``.
        rank: This process's rank; default from torch.distributed or ``RANK``.
        world_size: Number of ranks; default from torch.distributed or ``WORLD_SIZE``.
        buffer_chunks: Chunks per shuffle window; host memory holds about one window of
            batches being filled plus ``prefetch`` finished batches.
        prefetch: Batches prepared ahead on a background thread; 0 reads on the calling
            thread (no background thread: for CPU training on a machine without spare cores).
        num_threads: Parallel chunk reads.
        io: ``pread`` (default: one ``preadv`` per chunk straight into the batch rows; no
            mapped pages, so RSS is bounded by ``prefetch`` alone) or ``mmap`` (shard files
            stay mapped, up to ``map_bytes`` of them, which count in RSS; ``bench_loader``
            prints both).
        map_bytes: Budget of mapped shard-file bytes for ``io="mmap"``; mapped file pages
            count in RSS, so RSS stays below about this plus the batch buffers.
        verify: ``first`` checks each image chunk's crc32c on its first read in this process
            and again whenever its shard file changed (inode, size, mtime), so no byte is
            served unchecked while later epochs from a hot page cache skip the re-check;
            ``always`` checks every chunk on every read.
        cache_root: Cache root for a cache reference (default ``$NOSTALL_CACHE`` or
            ``~/.cache/nostall``).
        cache: A :class:`service.Cache` to resolve a cache reference with, instead.
        read_cache: For an ``s3://`` store: a :class:`~loaders.readcache.ReadCache` on local
            disk that image chunks are read through (``docs/scale.md``).

    Yields:
        Dicts with ``image`` (uint8 NHWC without augment, else what augment returns),
        ``label`` (int64; ``target`` with mixup instead) and ``index`` (int64), on ``device``.

    Raises:
        StoreOpenError: The store is incomplete, of another format version or lacks a field.
    """

    def __init__(self, store: str | Path | StoreInfo | tuple[Any, Any] | Mapping[str, Any],
                 batch_size: int, *,
                 device: str | torch.device = "cpu", shuffle: bool = True, seed: int = 0,
                 drop_last: bool = True, augment: Augment | None = None,
                 mixup: Mixup | None = None, rank: int | None = None,
                 world_size: int | None = None, buffer_chunks: int = 8, prefetch: int = 2,
                 num_threads: int = 2, io: str = "pread", map_bytes: int = 256 << 20,
                 verify: str = "first", cache_root: str | Path | None = None,
                 cache: Any = None, read_cache: ReadCache | None = None) -> None:
        self._lease = None
        if _is_cache_ref(store):
            from service import resolve  # lazy: the cache is optional for plain paths

            store, self._lease = resolve(store, cache_root=cache_root, cache=cache)  # type: ignore[arg-type]
        if not isinstance(store, (str, Path, StoreInfo)):
            raise TypeError(f"store must be a path, a StoreInfo or a cache reference: {store!r}")
        self.source = open_source(store, io=io, map_bytes=map_bytes, verify=verify,
                                  cache=read_cache)
        self.batch_size = _positive("batch_size", batch_size)
        self.buffer_chunks = _positive("buffer_chunks", buffer_chunks)
        self.prefetch = _positive("prefetch", prefetch, least=0)
        self.num_threads = _positive("num_threads", num_threads)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.device, self.seed = resolve_device(device), seed
        self.shuffle, self.drop_last = shuffle, drop_last
        self.augment, self.mixup = augment, mixup
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self._epoch, self._batch, self._resume = 0, 0, 0
        self._plans: dict[int, EpochPlan] = {}
        size, window = self.source.layout.size, buffer_chunks * self.source.layout.chunk_samples
        cuda = self.device.type == "cuda"  # pinned: ToDevice copies batches without staging
        self._buffers = BufferPool((size, size, 3), np.uint8, batch_size,
                                   keep=prefetch + 3 + -(-window // batch_size)
                                   + (ToDevice.SLOTS if cuda else 0), pin=cuda)
        self.plan()  # bad rank/world/chunk combinations raise here, before the first batch

    @property
    def epoch(self) -> int:
        """The epoch the next iteration serves."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch`` from its first batch on the next iteration."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        self._epoch, self._batch, self._resume = epoch, 0, 0

    def plan(self, epoch: int | None = None) -> EpochPlan:
        """Return the reading plan of ``epoch`` (default: the current one) on this rank."""
        epoch = self._epoch if epoch is None else epoch
        if epoch not in self._plans:
            layout = self.source.layout
            self._plans = {epoch: epoch_plan(
                layout.num_samples, layout.chunk_samples, seed=self.seed, epoch=epoch,
                rank=self.rank, world_size=self.world_size, shuffle=self.shuffle,
                buffer_chunks=self.buffer_chunks, valid=self.source.valid,
                batch_size=self.batch_size)}
        return self._plans[epoch]

    def __len__(self) -> int:
        """Number of batches of the current epoch (the same on every rank)."""
        return self.plan().batches(self.batch_size, self.drop_last)

    def variant(self, epoch: int | None = None) -> int:
        """Return the stored variant served in ``epoch`` (0 without variants)."""
        epoch = self._epoch if epoch is None else epoch
        return variant_for_epoch(self.seed, epoch, self.source.layout.variants)

    def _pipeline(self, plan: EpochPlan, variant: int) -> Node[dict[str, torch.Tensor]]:
        reader = BatchReader(self.source, plan, self.batch_size, self.drop_last, variant,
                             self.num_threads, self._buffers)
        if self.prefetch == 0:
            return ToDevice(reader, self.device)
        return ToDevice(Prefetcher(reader, depth=self.prefetch, name="nostall-read"),
                        self.device)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Yield the batches of the current epoch, then advance the epoch.

        A new iteration starts the epoch from its first batch, except right after
        :meth:`load_state_dict`, which resumes at the saved batch once. After a complete pass
        the epoch advances by one, so calling :meth:`set_epoch` each epoch is optional.
        """
        epoch, start = self._epoch, self._resume
        self._batch, self._resume = start, 0
        plan = self.plan(epoch)
        total = plan.batches(self.batch_size, self.drop_last)
        pipeline = self._pipeline(plan, self.variant(epoch))
        try:
            pipeline.reset({"batch": start})
            for number in range(start, total):
                batch = self._finish(pipeline.next(), epoch, number)
                self._batch = number + 1
                yield batch
            self._epoch, self._batch = epoch + 1, 0
        finally:
            pipeline.close()

    def _finish(self, batch: dict[str, torch.Tensor], epoch: int,
                number: int) -> dict[str, torch.Tensor]:
        out = {"image": batch["image"], "label": batch["label"], "index": batch["index"]}
        if self.augment is None and self.mixup is None:
            return out
        gen = torch.Generator(device=self.device)
        gen.manual_seed(batch_seed(self.seed, epoch, self.rank, number))
        if self.augment is not None:
            out["image"] = self.augment(out["image"], batch["extent"], gen)
        if self.mixup is not None:
            out["image"], out["target"] = self.mixup(out["image"], out.pop("label"), gen)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Return ``{epoch, batch, ...}``: the epoch and the batches served of it so far.

        Taken mid-iteration (e.g. in a checkpoint after batch ``b``), a loader that loads it
        serves the rest of that epoch exactly as this one would.
        """
        return {"epoch": self._epoch, "batch": self._batch, **self._identity()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state``'s epoch and batch on the next iteration.

        Raises:
            LoaderError: ``state`` came from a loader with another seed, rank, batch size,
                order settings or store.
        """
        mine = self._identity()
        diff = {k: (state.get(k), mine[k]) for k in _STATE_KEYS if state.get(k) != mine[k]}
        if diff:
            raise LoaderError(f"state does not match this loader (saved, current): {diff}")
        epoch, batch = int(state["epoch"]), int(state["batch"])
        total = self.plan(epoch).batches(self.batch_size, self.drop_last)
        if not 0 <= batch <= total:
            raise LoaderError(f"state batch {batch} outside [0, {total}] of epoch {epoch}")
        self._epoch, self._batch, self._resume = epoch, batch, batch

    def close(self) -> None:
        """Drop shard mappings and release the cache lease, if any (idempotent)."""
        self.source.image.close()
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def __enter__(self) -> StoreLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _identity(self) -> dict[str, Any]:
        return {"seed": self.seed, "world_size": self.world_size, "rank": self.rank,
                "batch_size": self.batch_size, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "buffer_chunks": self.buffer_chunks,
                "spec_hash": self.source.info.spec_hash}
