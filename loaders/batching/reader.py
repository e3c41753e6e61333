"""The host-side read node: whole chunks in, batches in epoch order out, one copy.

For a block of whole windows of the epoch plan at a time, :class:`BatchReader` groups the
positions they serve by (window, chunk, batch) with a few numpy calls; then, window by window,
it reads every chunk whole, one share of the chunks per thread (the copies and crc32c release
the GIL), routing its rows straight to their rows in their batch buffers: with one ``preadv``
whose buffers are those rows, or out of the mapped shard file with one gather per (chunk,
batch) run (a batch-sorted plan makes every group a run). The bytes go from the page cache to
the batch exactly once, checksum over the whole chunk. Every streamed array (a v2 store's masks
beside ``image``) is read the same way, chunk by chunk with the same routes, into its own batch
buffers. Rows the epoch does not serve (holes, the cut remainder, rows before a resume point,
edge padding) are not copied (mmap) or land in scratch (pread). A batch is handed out once
every window serving it was read; its per-sample arrays (labels, ``index``, ``extent``,
``is_pad``) are indexed for a few dozen batches at once and sliced. With ``io="ram"`` (every
streamed array already in memory, :mod:`loaders.store.ramrows`) no chunk is read: each batch is
one gather of its samples' rows per array, in the same order. A coded array in object storage
has the stored bytes of the next window's chunks fetched on I/O threads of their own while
the current window's decode (:meth:`~loaders.store.shardio.ShardedArrayReader.fetch_ahead`).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, NamedTuple

import numpy as np

from loaders.batching.nodes import Node
from loaders.batching.plan import EpochPlan
from loaders.batching.pools import submit_or_run
from loaders.errors import LoaderError
from loaders.store.open_store import OpenedStore
from loaders.store.rows import Run
from loaders.transfer.buffers import BufferPool

__all__ = ["BatchReader", "HostBatch", "stream_pools"]

HostBatch = dict[str, np.ndarray]
BLOCK_POSITIONS = 1 << 14  # positions grouped per numpy pass (whole windows; see _group)
GATHER_BATCHES = 32  # batches whose per-sample arrays are indexed at once (see _gather)


class _Groups(NamedTuple):
    """The (window, chunk, batch) groups of a block of windows (:meth:`BatchReader._group`).

    ``rows``/``at``: each position's chunk row and order position, grouped; per group: its
    sample chunk, batch, ``[first, end)`` into ``rows``/``at``, and whether it is a run.
    """

    rows: np.ndarray
    at: list[int]
    chunk: list[int]
    batch: list[int]
    first: list[int]
    end: list[int]
    run: list[bool]


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
        rows: Every streamed array already in memory, sample ``i`` in row ``i``
            (:func:`loaders.store.ramrows.load_rows`, ``io="ram"``): each batch is then one
            gather per array, in the same order; no chunk is read.
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
        rows: Mapping[str, np.ndarray] | None = None,
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
        if rows is not None and (variant or set(rows) != set(self.streams)):
            raise LoaderError(f"rows of {sorted(rows)}, variant {variant}: {sorted(self.streams)}")
        self.rows = rows
        self.num_threads = num_threads
        self._pool = (
            ThreadPoolExecutor(num_threads - 1, thread_name_prefix="nostall-read")
            if num_threads > 1 and rows is None
            else None
        )
        # coded arrays in object storage: the next window's chunks fetched while this one's
        # decode (ShardedArrayReader.fetch_ahead), on I/O threads of their own
        ahead = rows is None and any(s.fetches_ahead for s in self.streams.values())
        self._fetch = (
            ThreadPoolExecutor(max(2, num_threads), thread_name_prefix="nostall-fetch")
            if ahead
            else None
        )
        self._num_chunks = -(-source.layout.num_samples // plan.chunk_samples)
        self._coords_of: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._groups: dict[int, tuple[int, int]] = {}  # window -> its groups in self._g
        self._g = _Groups(np.zeros(0, np.int64), [], [], [], [], [], [])
        # batches [first, stop) and their per-sample arrays, gathered at once (_gather)
        self._per_sample: tuple[int, int, dict[str, np.ndarray]] = (0, 0, {})
        self._filling: dict[int, dict[str, np.ndarray]] = {}
        self._ready: dict[int, dict[str, np.ndarray]] = {}
        self._batch = self._window = 0
        self._last = plan.last_windows(batch_size)  # per batch: the last window serving it

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Restart at batch ``state["batch"]`` (default 0)."""
        batch = int((state or {}).get("batch", 0))
        if not 0 <= batch <= self.num_batches:
            raise LoaderError(f"batch {batch} outside [0, {self.num_batches}]")
        self._batch, self._filling, self._ready, self._groups = batch, {}, {}, {}
        self._per_sample = (0, 0, {})
        self._drop_ahead()
        self._window = self.plan.window_at(batch * self.batch_size)

    def get_state(self) -> dict[str, Any]:
        """Return ``{"batch": index of the next batch}``."""
        return {"batch": self._batch}

    def next(self) -> HostBatch:
        """Return the next batch, reading windows until it is complete."""
        if self._batch >= self.num_batches:
            raise StopIteration
        if self.rows is not None:
            self._ready[self._batch] = self._take_rows(self._batch, self.rows)
        while self._batch not in self._ready:
            if self._window >= len(self.plan.windows):
                raise LoaderError(f"batch {self._batch} is served by no window of the plan")
            self._read()
            self._window += 1
        streamed = self._ready.pop(self._batch)
        if not self._per_sample[0] <= self._batch < self._per_sample[1]:
            self._gather(self._batch)
        lo = (self._batch - self._per_sample[0]) * self.batch_size
        hi = lo + self._rows_of(self._batch)
        self._batch += 1
        batch = {name: values[lo:hi] for name, values in self._per_sample[2].items()}
        batch.update(streamed)
        return batch

    def _take_rows(self, batch: int, rows: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Batch ``batch`` gathered from ``rows``: one ``take`` per streamed array."""
        lo = batch * self.batch_size
        samples = self.plan.order[lo : lo + self._rows_of(batch)]
        for name, flat in zip(self.streams, self._flat(batch), strict=True):
            # "clip": numpy writes straight into the batch; the plan's samples are in range
            rows[name].take(samples, 0, flat, "clip")
        return self._filling.pop(batch)

    def _gather(self, batch: int) -> None:
        """Index every array read whole at open for :data:`GATHER_BATCHES` batches at once.

        Each batch then gets slices: its ``index`` (a copy of its order positions), the small
        arrays and ``extent`` of those samples, and ``is_pad`` (the plan's repeats come last).
        """
        stop = min(batch + GATHER_BATCHES, self.num_batches)
        lo = batch * self.batch_size
        hi = min(stop * self.batch_size, len(self.plan.order))
        index = self.plan.order[lo:hi].copy()
        arrays = {name: values[index] for name, values in self.small.items()}
        arrays["extent"] = self.extents[index]
        arrays.update(self.source.sample_ids(index))  # a mixture's: its store's slot, the store
        arrays["is_pad"] = self.plan.is_pad(lo, hi - lo)
        self._per_sample = (batch, stop, arrays)

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

    def _read(self) -> None:
        """Read the chunks of window ``self._window`` into their batches."""
        if self._window not in self._groups:
            self._group(self._window)
        g0, g1 = self._groups.pop(self._window)
        if g1 == g0:
            self._complete(self._window)
            return
        bs, g = self.batch_size, self._g
        rows, at = g.rows, g.at
        jobs: dict[int, list[list[Run]]] = {}  # chunk -> runs per streamed array, read order
        flat: dict[int, tuple[np.ndarray, ...]] = {}  # batch -> buffers, dropped after the read
        for chunk, batch_no, a, b, run in zip(
            g.chunk[g0:g1], g.batch[g0:g1], g.first[g0:g1], g.end[g0:g1], g.run[g0:g1], strict=True
        ):
            if batch_no not in flat:
                flat[batch_no] = self._flat(batch_no)
            per_array = jobs.get(chunk)
            if per_array is None:
                per_array = jobs[chunk] = [[] for _ in self.streams]
            if run:  # a batch-sorted plan gives only runs
                row0 = at[a] - batch_no * bs
                frm = rows[a:b]
                for k, buf in enumerate(flat[batch_no]):
                    per_array[k].append((buf[row0 : row0 + b - a], frm))
            else:  # one run per row
                for k, buf in enumerate(flat[batch_no]):
                    for j in range(a, b):
                        row = at[j] - batch_no * bs
                        per_array[k].append((buf[row : row + 1], rows[j : j + 1]))
        work = [(self._coords(c), runs) for c, runs in jobs.items()]
        self._fetch_next(self._window + 1)
        # one share of the chunks per thread, the calling thread reading one share itself:
        # one hand-off per helper thread and window, not one per chunk
        shares = [work[k :: self.num_threads] for k in range(1, self.num_threads)]
        helpers = (
            []
            if self._pool is None
            else [submit_or_run(self._pool, self._read_chunks, share) for share in shares if share]
        )
        try:
            self._read_chunks(work[:: self.num_threads])
        finally:
            wait(helpers)  # every share finished (or failed) before anything moves on
        for helper in helpers:
            helper.result()  # re-raise a helper's error here
        self._complete(self._window)

    def _group(self, w0: int) -> None:
        """Group the positions of the block of windows from ``w0`` on, with a few numpy calls.

        A block is whole windows of about :data:`BLOCK_POSITIONS` positions: each served
        position's chunk is found among its window's chunks (table lookups on sorted
        (window, chunk) keys), then the positions are sorted by (window, chunk slot, batch),
        ascending inside a group. :meth:`_read` copies each group as one run.

        Raises:
            LoaderError: A window serves a sample of a chunk it does not read.
        """
        windows, cs, bs = self.plan.windows, self.plan.chunk_samples, self.batch_size
        by_position, bounds = self.plan.by_window
        w1 = w0 + 1
        while w1 < len(windows) and bounds[w1] - bounds[w0] < BLOCK_POSITIONS:
            w1 += 1
        first, stop = self._limits()
        positions = by_position[bounds[w0] : bounds[w1]]
        positions = positions[(positions >= first) & (positions < stop)]
        if not len(positions):
            self._groups.update((w, (0, 0)) for w in range(w0, w1))
            return
        served = self.plan.order[positions]
        win = self.plan.window_of[positions] - w0  # block-relative window
        lists = [w.chunks for w in windows[w0:w1]]
        lens = np.array([len(c) for c in lists])
        keys = np.repeat(np.arange(w1 - w0), lens) * self._num_chunks + np.concatenate(lists)
        slots = np.arange(len(keys)) - np.repeat(np.cumsum(lens) - lens, lens)
        by_key = np.argsort(keys, kind="stable")
        keys, slots = keys[by_key], slots[by_key]
        needed = served // cs
        if not len(keys):
            raise LoaderError(
                f"window {windows[w0].number} serves samples of chunks it does not read"
            )
        wanted = win * self._num_chunks + needed
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        found = keys[at] == wanted
        if not found.all():
            number = windows[w0 + int(win[np.argmin(found)])].number
            raise LoaderError(f"window {number} serves samples of chunks it does not read")
        slot = slots[at]
        by = np.lexsort((positions, slot, win))
        win, slot, positions = win[by], slot[by], positions[by]
        batch = positions // bs
        cut = (np.diff(win) != 0) | (np.diff(slot) != 0) | (np.diff(batch) != 0)
        first_of = np.concatenate(([0], np.flatnonzero(cut) + 1))
        end_of = np.append(first_of[1:], len(positions))
        run = positions[end_of - 1] - positions[first_of] == end_of - first_of - 1
        self._g = _Groups(
            rows=(served % cs)[by],
            at=positions.tolist(),
            chunk=needed[by][first_of].tolist(),
            batch=batch[first_of].tolist(),
            first=first_of.tolist(),
            end=end_of.tolist(),
            run=run.tolist(),
        )
        bounds_of = np.searchsorted(win[first_of], np.arange(w1 - w0 + 1)).tolist()
        self._groups.update((w0 + i, (bounds_of[i], bounds_of[i + 1])) for i in range(w1 - w0))

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

    def _fetch_next(self, window: int) -> None:
        """Start fetching the coded chunks window ``window`` reads, while this one decodes."""
        if self._fetch is None or window >= len(self.plan.windows):
            return
        if window not in self._groups:  # the next block (the current one's groups are held)
            self._group(window)
        g0, g1 = self._groups[window]
        chunks = [self._coords(c) for c in dict.fromkeys(self._g.chunk[g0:g1])]
        for k, stream in enumerate(self.streams.values()):
            stream.fetch_ahead([coords[k] for coords in chunks], self._fetch)

    def _drop_ahead(self) -> None:
        """Forget this reader's fetches started ahead (another epoch's reader keeps its own)."""
        if self._fetch is not None:
            for stream in self.streams.values():
                stream.drop_ahead(self._fetch)

    def _coords(self, chunk: int) -> tuple[tuple[int, ...], ...]:
        """The inner-chunk coordinates of sample chunk ``chunk``, one per streamed array."""
        found = self._coords_of.get(chunk)
        if found is None:
            coords = self.source.chunk_coords
            found = self._coords_of[chunk] = tuple(
                coords(chunk, self.variant, name) for name in self.streams
            )
        return found

    def _complete(self, window: int) -> None:
        """Move every batch that no window after ``window`` serves to the ready set."""
        for batch in sorted(self._filling):
            if self._last[batch] <= window:
                self._ready[batch] = self._filling.pop(batch)

    def close(self) -> None:
        """Shut the read pools down, the fetches started ahead forgotten."""
        self._drop_ahead()
        for pool in (self._pool, self._fetch):
            if pool is not None:
                pool.shutdown(wait=True)
