"""The host-side read node: whole chunks in, batches in epoch order out, one copy.

For each window of the epoch plan, :class:`BatchReader` reads every chunk the window serves
whole (in parallel on a small pool: the copies and crc32c release the GIL) and routes each of
its rows straight to its row in its batch buffer: out of the mapped shard file with one
vectorised copy per (chunk, batch), or with one ``preadv`` whose buffers are those rows. The
bytes go from the page cache to the batch exactly once, checksum over the whole chunk. Rows
the epoch does not serve (holes, the cut remainder, rows before a resume point, edge padding)
are not copied (mmap) or land in scratch (pread). A batch is handed out once every window
serving it was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from loaders.buffers import BufferPool
from loaders.errors import LoaderError
from loaders.nodes import Node
from loaders.plan import EpochPlan, Window
from loaders.shardio import Route
from loaders.source import StoreSource

__all__ = ["BatchReader", "HostBatch"]

HostBatch = dict[str, np.ndarray]


class BatchReader(Node[HostBatch]):
    """Yield the batches of ``plan`` as dicts of numpy arrays.

    Each batch holds ``image`` (B, S, S, 3) uint8, ``label`` (B,) int64, ``extent`` (B, 4) int32
    of the served variant and ``index`` (B,) int64. State: ``{"batch": next batch}``.

    Args:
        source: The opened store.
        plan: The epoch plan.
        batch_size: Samples per batch.
        drop_last: Leave out a last, smaller batch.
        variant: Stored variant to read (0 without variants).
        num_threads: Parallel chunk reads (1: read on the calling thread).
        pool: Where batch buffers come from (shared across epochs by the loader); default a
            pool of its own.
    """

    def __init__(self, source: StoreSource, plan: EpochPlan, batch_size: int, drop_last: bool,
                 variant: int = 0, num_threads: int = 2, pool: BufferPool | None = None) -> None:
        self.source, self.plan, self.batch_size, self.variant = source, plan, batch_size, variant
        size = source.layout.size
        self.pool = pool or BufferPool((size, size, 3), np.uint8, batch_size, keep=8)
        self.num_batches = plan.batches(batch_size, drop_last)
        extents = source.extents
        self.extents = extents[:, variant] if extents.ndim == 3 else extents
        self._pool = (ThreadPoolExecutor(num_threads, thread_name_prefix="nostall-read")
                      if num_threads > 1 else None)
        self._filling: dict[int, np.ndarray] = {}
        self._ready: dict[int, np.ndarray] = {}
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
        image = self._ready.pop(self._batch)
        lo = self._batch * self.batch_size
        index = self.plan.order[lo:lo + len(image)].copy()
        self._batch += 1
        return {"image": image, "label": self.source.labels[index],
                "extent": self.extents[index], "index": index}

    def _limits(self) -> tuple[int, int]:
        """Return the order positions still to serve: ``[first, stop)``."""
        stop = min(self.num_batches * self.batch_size, len(self.plan.order))
        return self._batch * self.batch_size, stop

    def _rows(self, batch: int) -> np.ndarray:
        if batch not in self._filling:
            n = min(self.batch_size, len(self.plan.order) - batch * self.batch_size)
            self._filling[batch] = self.pool.take(n)
        return self._filling[batch]

    def _read(self, window: Window) -> None:
        cs = self.plan.chunk_samples
        first, stop = self._limits()
        served = self.plan.order[window.start:window.stop]
        positions = np.arange(window.start, window.stop)
        keep = (positions >= first) & (positions < stop)
        served, positions = served[keep], positions[keep]
        chunks = window.chunks[np.isin(window.chunks, served // cs)]
        where = np.full((len(chunks), cs), -1, np.int64)  # order position of each chunk row
        sorter = np.argsort(chunks)
        slot = sorter[np.searchsorted(chunks, served // cs, sorter=sorter)]
        where[slot, served % cs] = positions
        jobs = [(int(c), self._routes(w)) for c, w in zip(chunks.tolist(), where.tolist(),
                                                           strict=True)]
        if self._pool is None:
            for job in jobs:
                self._read_chunk(job)
        else:
            list(self._pool.map(self._read_chunk, jobs))
        self._complete(window.stop)

    def _routes(self, where: list[int]) -> list[Route]:
        """Return where a chunk's rows go: ``(batch buffer, batch rows, chunk rows)`` per batch.

        ``where`` holds each chunk row's position in the epoch order, or -1 (not served).
        """
        groups: dict[int, tuple[list[int], list[int]]] = {}
        for row, pos in enumerate(where):
            if pos >= 0:
                batch_rows, chunk_rows = groups.setdefault(pos // self.batch_size, ([], []))
                batch_rows.append(pos % self.batch_size)
                chunk_rows.append(row)
        return [(self._rows(batch), b, c) for batch, (b, c) in groups.items()]

    def _read_chunk(self, job: tuple[int, list[Route]]) -> None:
        chunk, routes = job
        self.source.image.read_chunk_rows(self.source.chunk_coords(chunk, self.variant), routes)

    def _complete(self, stop: int) -> None:
        """Move every batch whose last position is below ``stop`` to the ready set."""
        for batch in sorted(self._filling):
            end = batch * self.batch_size + len(self._filling[batch])
            if end <= stop:
                self._ready[batch] = self._filling.pop(batch)

    def close(self) -> None:
        """Shut the read pool down."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
