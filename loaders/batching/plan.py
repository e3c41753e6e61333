"""The reading plan of one epoch on one rank: which chunks, in which windows, serving which samples.

A pure function of the store geometry, the valid mask and (seed, epoch, rank, world_size), built
on :mod:`loaders.batching.order`: the sample order is exactly
:func:`loaders.batching.order.epoch_order`, cut into
the windows of ``buffer_chunks`` chunks it was shuffled in, so a reader holds one window at a
time and a resumed run can start at any batch. With ``pad``, the positions from
:attr:`EpochPlan.real` on repeat samples served elsewhere (see :mod:`loaders.batching.order`);
a loader marks them ``is_pad`` in its batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loaders.batching.order import join_windows, num_batches, rank_windows

__all__ = ["EpochPlan", "Window", "epoch_plan"]


@dataclass(frozen=True)
class Window:
    """One window: the chunks read together and the slice of the epoch order they serve.

    Attributes:
        number: Window number within the epoch.
        chunks: Sample-chunk indices to read, in reading order.
        start: First position in the epoch order served by this window.
        stop: One past the last position served.
    """

    number: int
    chunks: npt.NDArray[np.int64]
    start: int
    stop: int


@dataclass(frozen=True)
class EpochPlan:
    """The order and windows of one epoch on one rank.

    Attributes:
        order: Sample indices in serving order (same length on every rank).
        windows: Windows in reading order.
        chunk_samples: Samples per chunk.
        epoch: The epoch this plan is for.
        real: Positions before this one are real; the rest repeat samples (padding).
    """

    order: npt.NDArray[np.int64]
    windows: tuple[Window, ...]
    chunk_samples: int
    epoch: int
    real: int

    @property
    def repeats(self) -> npt.NDArray[np.int64]:
        """The samples served as padding repeats (none without ``pad``)."""
        return self.order[self.real :]

    def is_pad(self, lo: int, n: int) -> npt.NDArray[np.bool_]:
        """Return the ``is_pad`` flags of the ``n`` positions from ``lo`` on.

        The repeats that even out the ranks come last in the order (positions from
        :attr:`real` on), so a row's flag is its position's. Every loader marks ``is_pad``
        with this.
        """
        return np.arange(lo, lo + n) >= self.real

    def batches(self, batch_size: int, drop_last: bool) -> int:
        """Return the number of batches of this epoch."""
        return num_batches(len(self.order), batch_size, drop_last)

    def window_at(self, position: int) -> int:
        """Return the index into ``windows`` of the window serving order ``position``."""
        for i, w in enumerate(self.windows):
            if w.start <= position < w.stop:
                return i
        return len(self.windows)


def epoch_plan(
    num_samples: int,
    chunk_samples: int,
    *,
    seed: int,
    epoch: int,
    rank: int,
    world_size: int,
    shuffle: bool,
    buffer_chunks: int,
    valid: npt.NDArray[np.bool_] | None,
    batch_size: int | None = None,
    pad: bool = False,
) -> EpochPlan:
    """Return the :class:`EpochPlan` of ``rank`` in ``epoch`` (pure).

    With ``batch_size``, each batch's samples are served in store order within each window
    (:func:`loaders.batching.order.sort_within_batches`), so the reader copies runs, not rows. With
    ``pad``, ranks are evened out by marked repeats instead of leaving samples out.
    """
    windows, real = rank_windows(
        num_samples,
        chunk_samples,
        seed=seed,
        epoch=epoch,
        rank=rank,
        world_size=world_size,
        shuffle=shuffle,
        buffer_chunks=buffer_chunks,
        valid=valid,
        pad=pad,
    )
    order = join_windows(windows, batch_size)
    cut, pos = [], 0
    for number, (chunks, samples) in enumerate(windows):
        cut.append(Window(number, chunks.astype(np.int64), pos, pos + len(samples)))
        pos += len(samples)
    return EpochPlan(order, tuple(cut), chunk_samples, epoch, real)
