"""The host-side read node: whole chunks in, batches in epoch order out, one copy.

For each window of the epoch plan, :class:`BatchReader` groups the positions the window serves
by (chunk, batch) with a few numpy calls, then reads every chunk whole, one share of the chunks
per thread (the copies and crc32c release the GIL), routing its rows straight to their rows in
their batch buffers: with one ``preadv`` whose buffers are those rows, or out of the mapped
shard file with one gather per (chunk, batch) run (a batch-sorted plan makes every group a
run). The bytes go from the page cache to the batch exactly once, checksum over the whole
chunk. Every streamed array (a v2 store's masks beside ``image``) is read the same way, chunk
by chunk with the same routes, into its own batch buffers. Rows the epoch does not serve
(holes, the cut remainder, rows before a resume point, edge padding) are not copied (mmap)
or land in scratch (pread). A batch is handed out once every window serving it was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from loaders.batching.nodes import Node
from loaders.batching.plan import EpochPlan, Window
from loaders.errors import LoaderError
from loaders.store.open_store import OpenedStore
from loaders.store.rows import Run
from loaders.transfer.buffers import BufferPool

__all__ = ["BatchReader", "HostBatch", "stream_pools"]

HostBatch = dict[str, np.ndarray]


def stream_pools(
    source: OpenedStore, batch_size: int, keep: int, pin: bool = False
) -> dict[str, BufferPool]:
    """One :class:`BufferPool` of batch buffers per streamed array of ``source``."""
    arrays = source.layout.arrays
    return {
        name: BufferPool(
            source.row_shape(name), np.dtype(arrays[name].dtype), batch_size, keep, pin
        )
        for name in source.streams
    }


class BatchReader(Node[HostBatch]):
    """Yield the batches of ``plan`` as dicts of numpy arrays.

    Each batch holds every streamed array (``image`` (B, S, S, 3) uint8, a v2 store's masks)
    read chunk by chunk into its batch rows, every array read whole at open (``label`` (B,)
    int64, keypoints, companions) indexed by the batch's samples, ``extent`` (B, 4) int32,
    ``index`` (B,) int64, all of the served variant, and ``is_pad`` (B,) bool: True on the
    plan's padding repeats (its positions from :attr:`EpochPlan.real` on).
    State: ``{"batch": next batch}``.

    Args:
        source: The opened store.
        plan: The epoch plan.
        batch_size: Samples per batch.
        drop_last: Leave out a last, smaller batch.
        variant: Stored variant to read (0 without variants).
        num_threads: Parallel chunk reads.
        pools: Where each streamed array's batch buffers come from, by name (shared across
            epochs by the loader); default pools of its own.
    """

    def __init__(
        self,
        source: OpenedStore,
        plan: EpochPlan,
        batch_size: int,
        drop_last: bool,
        variant: int = 0,
        num_threads: int = 2,
        pools: Mapping[str, BufferPool] | None = None,
    ) -> None:
        self.source, self.plan, self.batch_size, self.variant = source, plan, batch_size, variant
        self.pools = dict(pools) if pools is not None else stream_pools(source, batch_size, 8)
        self.num_batches = plan.batches(batch_size, drop_last)
        self.streams = source.streams
        for name, stream in self.streams.items():  # the runs' chunk rows are in range
            if stream.meta.chunk_shape[0] != plan.chunk_samples or name not in self.pools:
                raise LoaderError(
                    f"{name}: chunks of {stream.meta.chunk_shape[0]} samples (or no batch "
                    f"buffers), the plan has {plan.chunk_samples}"
                )
        axis = source.variant_axis
        self.small = {k: v[:, variant] if k in axis else v for k, v in source.small.items()}
        extents = source.extents
        self.extents = extents[:, variant] if extents.ndim == 3 else extents
        self.num_threads = num_threads
        self._pool = (
            ThreadPoolExecutor(num_threads - 1, thread_name_prefix="nostall-read")
            if num_threads > 1
            else None
        )
        self._slot_of = np.zeros(-(-source.layout.num_samples // plan.chunk_samples), np.intp)
        self._filling: dict[int, dict[str, np.ndarray]] = {}
        self._ready: dict[int, dict[str, np.ndarray]] = {}
        self._batch = self._window = 0

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Restart at batch ``state["batch"]`` (default 0)."""
        batch = int((state or {}).get("batch", 0))
        if not 0 <= batch <= self.num_batches:
            raise LoaderError(f"batch {batch} outside [0, {self.num_batches}]")
        self._batch, self._filling, self._ready = batch, {}, {}
        self._window = self.plan.window_at(batch * self.batch_size)

    def get_state(self) -> dict[str, Any]:
        """Return ``{"batch": index of the next batch}``."""
        return {"batch": self._batch}

    def next(self) -> HostBatch:
        """Return the next batch, reading windows until it is complete."""
        if self._batch >= self.num_batches:
            raise StopIteration
        while self._batch not in self._ready:
            if self._window >= len(self.plan.windows):
                raise LoaderError(f"batch {self._batch} is served by no window of the plan")
            self._read(self.plan.windows[self._window])
            self._window += 1
        streamed = self._ready.pop(self._batch)
        lo = self._batch * self.batch_size
        n = self._rows_of(self._batch)
        index = self.plan.order[lo : lo + n].copy()
        self._batch += 1
        batch = {name: values[index] for name, values in self.small.items()}
        batch.update(streamed)
        batch["extent"] = self.extents[index]
        batch["index"] = index
        batch["is_pad"] = np.arange(lo, lo + n) >= self.plan.real  # repeats come last
        return batch

    def _limits(self) -> tuple[int, int]:
        """Return the order positions still to serve: ``[first, stop)``."""
        stop = min(self.num_batches * self.batch_size, len(self.plan.order))
        return self._batch * self.batch_size, stop

    def _rows_of(self, batch: int) -> int:
        return min(self.batch_size, len(self.plan.order) - batch * self.batch_size)

    def _rows(self, batch: int) -> dict[str, np.ndarray]:
        if batch not in self._filling:
            n = self._rows_of(batch)
            self._filling[batch] = {name: pool.take(n) for name, pool in self.pools.items()}
        return self._filling[batch]

    def _read(self, window: Window) -> None:
        cs, bs = self.plan.chunk_samples, self.batch_size
        first, stop = self._limits()
        lo, hi = max(window.start, first), min(window.stop, stop)
        if hi <= lo:
            self._complete(window.stop)
            return
        served = self.plan.order[lo:hi]
        positions = np.arange(lo, hi)
        # each served sample's chunk as a slot into the window's chunks that serve any, in
        # reading order: O(n) table lookups, no sorting
        self._slot_of[window.chunks] = np.arange(len(window.chunks))
        needed = served // cs
        slot = self._slot_of[needed]
        if not np.array_equal(window.chunks[slot], needed):
            raise LoaderError(f"window {window.number} serves samples of chunks it does not read")
        keep = np.bincount(slot, minlength=len(window.chunks)) > 0
        chunks = window.chunks[keep]
        slot = (np.cumsum(keep) - 1)[slot]
        # group the served positions by (chunk slot, batch); positions ascend inside a group
        by = np.lexsort((positions, slot))
        slot, positions, rows = slot[by], positions[by], (served % cs)[by]
        cut = np.flatnonzero((np.diff(slot) != 0) | (np.diff(positions // bs) != 0)) + 1
        bounds = [0, *cut.tolist(), len(slot)]
        jobs: list[tuple[tuple[tuple[int, ...], ...], list[list[Run]]]] = [
            (self._coords(c), [[] for _ in self.streams]) for c in chunks.tolist()
        ]
        starts, at = slot[bounds[:-1]].tolist(), positions.tolist()
        flat: dict[int, tuple[np.ndarray, ...]] = {}  # batch -> buffers, dropped after the read
        for s, a, b in zip(starts, bounds[:-1], bounds[1:], strict=True):
            batch_no, row0 = divmod(at[a], bs)
            if batch_no not in flat:
                flat[batch_no] = self._flat(batch_no)
            frm, per_array = rows[a:b], jobs[s][1]
            if at[b - 1] - at[a] == b - a - 1:  # a run (a batch-sorted plan gives only runs)
                for k, buf in enumerate(flat[batch_no]):
                    per_array[k].append((buf[row0 : row0 + b - a], frm))
            else:  # one run per row
                for k, buf in enumerate(flat[batch_no]):
                    for j in range(a, b):
                        row = at[j] - batch_no * bs
                        per_array[k].append((buf[row : row + 1], rows[j : j + 1]))
        # one share of the chunks per thread, the calling thread reading one share itself:
        # one hand-off per helper thread and window, not one per chunk
        shares = [jobs[k :: self.num_threads] for k in range(1, self.num_threads)]
        helpers = (
            []
            if self._pool is None
            else [self._pool.submit(self._read_chunks, share) for share in shares if share]
        )
        try:
            self._read_chunks(jobs[:: self.num_threads])
        finally:
            wait(helpers)  # every share finished (or failed) before anything moves on
        for helper in helpers:
            helper.result()  # re-raise a helper's error here
        self._complete(window.stop)

    def _flat(self, batch: int) -> tuple[np.ndarray, ...]:
        """The batch's buffers as (rows, bytes) uint8 views, one per streamed array, in order."""
        bufs = self._rows(batch)
        return tuple(
            bufs[name].reshape(len(bufs[name]), -1).view(np.uint8) for name in self.streams
        )

    def _read_chunks(self, jobs: list[tuple[tuple[tuple[int, ...], ...], list[list[Run]]]]) -> None:
        """Read each job's chunk of every streamed array, copying its runs into the batches."""
        for coords, runs in jobs:
            for k, reader in enumerate(self.streams.values()):
                reader.read_chunk_runs(coords[k], runs[k])

    def _coords(self, chunk: int) -> tuple[tuple[int, ...], ...]:
        """The inner-chunk coordinates of sample chunk ``chunk``, one per streamed array."""
        coords = self.source.chunk_coords
        return tuple(coords(chunk, self.variant, name) for name in self.streams)

    def _complete(self, stop: int) -> None:
        """Move every batch whose last position is below ``stop`` to the ready set."""
        for batch in sorted(self._filling):
            end = batch * self.batch_size + self._rows_of(batch)
            if end <= stop:
                self._ready[batch] = self._filling.pop(batch)

    def close(self) -> None:
        """Shut the read pool down."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
