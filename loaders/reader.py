"""Host-side nodes: read whole chunks window by window, then gather batches in epoch order.

:class:`ChunkReader` reads every chunk a window serves, whole, with one ``pread`` each (in
parallel on a small thread pool: ``pread`` and crc32c release the GIL) into one window buffer.
:class:`Batcher` gathers each batch's samples from the buffered windows into a fresh array,
crossing window boundaries when a batch does. Neither ever reads a single sample by index.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from loaders.errors import LoaderError
from loaders.nodes import Node
from loaders.plan import EpochPlan, Window
from loaders.source import StoreSource

__all__ = ["Batcher", "ChunkReader", "WindowData"]

HostBatch = dict[str, np.ndarray]


@dataclass(frozen=True)
class WindowData:
    """A read window: its chunks' samples and where each served sample sits in them.

    Attributes:
        window: The planned window.
        images: (chunks * chunk_samples, S, S, 3) uint8, the chunks back to back.
        local: Row of ``images`` for each order position ``window.start .. window.stop - 1``.
    """

    window: Window
    images: np.ndarray
    local: np.ndarray


class ChunkReader(Node[WindowData]):
    """Yield the windows of ``plan`` for one variant, each read whole.

    Args:
        source: The opened store.
        plan: The epoch plan.
        variant: Stored variant to read (0 without variants).
        num_threads: Parallel chunk reads per window (1: read on the calling thread).
    """

    def __init__(self, source: StoreSource, plan: EpochPlan, variant: int = 0,
                 num_threads: int = 2) -> None:
        self.source, self.plan, self.variant = source, plan, variant
        self._pool = (ThreadPoolExecutor(num_threads, thread_name_prefix="nostall-read")
                      if num_threads > 1 else None)
        self._next = 0

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Restart at window ``state["window"]`` (default 0)."""
        self._next = int((state or {}).get("window", 0))

    def get_state(self) -> dict[str, Any]:
        """Return ``{"window": index of the next window}``."""
        return {"window": self._next}

    def next(self) -> WindowData:
        """Read and return the next window."""
        if self._next >= len(self.plan.windows):
            raise StopIteration
        data = self._read(self.plan.windows[self._next])
        self._next += 1
        return data

    def _read(self, window: Window) -> WindowData:
        cs = self.plan.chunk_samples
        served = self.plan.order[window.start:window.stop]
        owner = served // cs
        chunks = window.chunks[np.isin(window.chunks, owner)]
        layout = self.source.layout
        images = np.empty((len(chunks) * cs, layout.size, layout.size, 3), np.uint8)
        views = images.reshape(len(chunks), *layout.image_chunk)
        jobs = [(self.source.chunk_coords(int(c), self.variant), views[j])
                for j, c in enumerate(chunks)]
        read = self.source.image.read_chunk
        if self._pool is None:
            for coords, out in jobs:
                read(coords, out)
        else:
            list(self._pool.map(lambda job: read(*job), jobs))
        sorter = np.argsort(chunks)
        slot = sorter[np.searchsorted(chunks, owner, sorter=sorter)]
        return WindowData(window, images, slot * cs + served % cs)

    def close(self) -> None:
        """Shut the read pool down."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class Batcher(Node[HostBatch]):
    """Gather batches of ``batch_size`` samples in epoch order from buffered windows.

    Yields dicts of numpy arrays: ``image`` (B, S, S, 3) uint8, ``label`` (B,) int64,
    ``extent`` (B, 4) int32 (of the served variant), ``index`` (B,) int64.

    Args:
        windows: Node yielding :class:`WindowData` of ``plan`` (usually prefetched).
        plan: The epoch plan.
        batch_size: Samples per batch.
        drop_last: Leave out a last, smaller batch.
        labels: All labels of the store.
        extents: All extents of the served variant, (N, 4).
        size: Stored side length S.
    """

    def __init__(self, windows: Node[WindowData], plan: EpochPlan, batch_size: int,
                 drop_last: bool, labels: np.ndarray, extents: np.ndarray, size: int) -> None:
        self.windows, self.plan, self.batch_size, self.size = windows, plan, batch_size, size
        self.labels, self.extents = labels, extents
        self.num_batches = plan.batches(batch_size, drop_last)
        self._held: deque[WindowData] = deque()
        self._batch = 0

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Restart at batch ``state["batch"]`` (default 0), reading from its first window."""
        self._batch = int((state or {}).get("batch", 0))
        if not 0 <= self._batch <= self.num_batches:
            raise LoaderError(f"batch {self._batch} outside [0, {self.num_batches}]")
        self._held.clear()
        self.windows.reset({"window": self.plan.window_at(self._batch * self.batch_size)})

    def get_state(self) -> dict[str, Any]:
        """Return ``{"batch": index of the next batch}``."""
        return {"batch": self._batch}

    def next(self) -> HostBatch:
        """Gather and return the next batch."""
        if self._batch >= self.num_batches:
            raise StopIteration
        lo = self._batch * self.batch_size
        hi = min(lo + self.batch_size, len(self.plan.order))
        image = np.empty((hi - lo, self.size, self.size, 3), np.uint8)
        pos = lo
        while pos < hi:
            data = self._window_for(pos)
            stop = min(hi, data.window.stop)
            rows = data.local[pos - data.window.start:stop - data.window.start]
            np.take(data.images, rows, axis=0, out=image[pos - lo:stop - lo], mode="clip")
            pos = stop
        index = self.plan.order[lo:hi].copy()
        self._batch += 1
        return {"image": image, "label": self.labels[index], "extent": self.extents[index],
                "index": index}

    def _window_for(self, pos: int) -> WindowData:
        while self._held and self._held[0].window.stop <= pos:
            self._held.popleft()
        while not self._held or self._held[-1].window.stop <= pos:
            self._pull()
        for data in self._held:
            if data.window.start <= pos < data.window.stop:
                return data
        raise LoaderError(f"order position {pos} is in no read window")

    def _pull(self) -> WindowData:
        try:
            data = self.windows.next()
        except StopIteration:
            raise LoaderError("the reader ran out of windows before the plan's end") from None
        self._held.append(data)
        return data

    def close(self) -> None:
        """Close the window source."""
        self.windows.close()
