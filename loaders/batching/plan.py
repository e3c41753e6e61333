"""The reading plan of one epoch on one rank: which chunks, in which windows, serving which samples.

A pure function of the store geometry, the selection and (seed, epoch, rank, world_size), built
on :mod:`loaders.batching.order` (and :mod:`loaders.selection` for subsets, weights, mixtures and
a resume on another world size): the sample order, each position's window (the window of
``buffer_chunks`` chunk visits it was shuffled in, which reads its chunks whole) and each
position's ``is_pad`` flag. A reader reads the windows in order, holding the batches they
serve, and a resumed run can start at any batch. In the plain plan each window serves one run
of consecutive positions (:func:`epoch_plan`); a mixture served in proportions per batch, or
a resume on another world size, interleaves windows (:func:`assemble`), and a batch is
complete once every window serving one of its positions was read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from loaders.batching.order import RankWindow, join_windows, num_batches, rank_windows

__all__ = ["EpochPlan", "Window", "assemble", "epoch_plan", "plan_of_windows"]

Indices = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Window:
    """One window: the chunks read together and the positions of the epoch order they serve.

    Attributes:
        number: Window number within the epoch (its place in reading order).
        chunks: Sample-chunk indices to read, each once, in reading order.
        start: First position in the epoch order served by this window.
        stop: One past the last position served (in a plain plan it serves every position
            in between; see :attr:`EpochPlan.window_of`).
    """

    number: int
    chunks: npt.NDArray[np.int64]
    start: int
    stop: int


@dataclass(frozen=True, eq=False)
class EpochPlan:
    """The order and windows of one epoch on one rank.

    Attributes:
        order: Sample indices in serving order (same length on every rank).
        windows: Windows in reading order.
        chunk_samples: Samples per chunk.
        epoch: The epoch this plan is for.
        pad: Per position: a repeat that only evens out the ranks (``is_pad``).
        window_of: Per position: the index into ``windows`` of the window serving it.
    """

    order: npt.NDArray[np.int64]
    windows: tuple[Window, ...]
    chunk_samples: int
    epoch: int
    pad: npt.NDArray[np.bool_]
    window_of: npt.NDArray[np.int64]

    @property
    def real(self) -> int:
        """The first padding position (``len(order)`` without); positions before it are real."""
        found = np.flatnonzero(self.pad)
        return int(found[0]) if len(found) else len(self.order)

    @property
    def repeats(self) -> npt.NDArray[np.int64]:
        """The samples served as padding repeats (none without ``pad``)."""
        return self.order[self.pad]

    def is_pad(self, lo: int, n: int) -> npt.NDArray[np.bool_]:
        """Return the ``is_pad`` flags of the ``n`` positions from ``lo`` on.

        Every loader marks ``is_pad`` with this.
        """
        return self.pad[lo : lo + n]

    def batches(self, batch_size: int, drop_last: bool) -> int:
        """Return the number of batches of this epoch."""
        return num_batches(len(self.order), batch_size, drop_last)

    def window_at(self, position: int) -> int:
        """Return the first window (in reading order) that serves ``position`` or a later one."""
        if position >= len(self.order):
            return len(self.windows)
        return int(self.window_of[position:].min())

    @cached_property
    def by_window(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(positions, bounds)``: the positions sorted by (window, position), and bounds.

        Window ``w``'s positions are ``positions[bounds[w]:bounds[w + 1]]``.
        """
        positions = np.argsort(self.window_of, kind="stable").astype(np.int64)
        bounds = np.searchsorted(self.window_of[positions], np.arange(len(self.windows) + 1))
        return positions, bounds.astype(np.int64)

    def open_batches(self, batch_size: int) -> int:
        """The most batches a reader fills at once: begun by a window read, not yet complete."""
        if not len(self.order):
            return 0
        starts = np.arange(0, len(self.order), batch_size)
        first = np.minimum.reduceat(self.window_of, starts)
        last = np.maximum.reduceat(self.window_of, starts)
        change = np.zeros(len(self.windows) + 1, np.int64)
        np.add.at(change, first, 1)
        np.add.at(change, last + 1, -1)
        return int(np.cumsum(change).max())

    def last_windows(self, batch_size: int) -> npt.NDArray[np.int64]:
        """Per batch: the last window (in reading order) serving one of its positions."""
        if not len(self.order):
            return np.zeros(0, np.int64)
        starts = np.arange(0, len(self.order), batch_size)
        return np.maximum.reduceat(self.window_of, starts).astype(np.int64)


def plan_of_windows(
    windows: Sequence[RankWindow],
    real: int,
    chunk_samples: int,
    epoch: int,
    batch_size: int | None,
) -> EpochPlan:
    """The plain plan of one rank's windows (:func:`loaders.batching.order.rank_windows`).

    Each window serves one run of positions; the positions from ``real`` on are padding.
    """
    order = join_windows(list(windows), batch_size)
    sizes = [len(samples) for _, samples in windows]
    window_of = np.repeat(np.arange(len(windows), dtype=np.int64), sizes)
    cut, pos = [], 0
    for number, (chunks, samples) in enumerate(windows):
        cut.append(Window(number, chunks.astype(np.int64), pos, pos + len(samples)))
        pos += len(samples)
    pad = np.arange(len(order)) >= real
    return EpochPlan(order, tuple(cut), chunk_samples, epoch, pad, window_of)


def assemble(
    order: Indices,
    window_of: Indices,
    chunks: Sequence[Indices],
    pad: npt.NDArray[np.bool_],
    chunk_samples: int,
    epoch: int,
) -> EpochPlan:
    """A plan whose windows may interleave: windows renumbered in order of their first position.

    Args:
        order: Sample per position.
        window_of: Per position, an index into ``chunks`` (windows serving no position are
            dropped).
        chunks: Each window's chunks, each once.
        pad: Per position, whether it is a padding repeat.
        chunk_samples: Samples per chunk.
        epoch: The epoch.
    """
    if not len(order):
        return EpochPlan(order, (), chunk_samples, epoch, pad, window_of)
    first = np.full(len(chunks), len(order), np.int64)
    np.minimum.at(first, window_of, np.arange(len(order)))
    last = np.full(len(chunks), -1, np.int64)
    np.maximum.at(last, window_of, np.arange(len(order)))
    used = np.flatnonzero(last >= 0)
    used = used[np.argsort(first[used], kind="stable")]
    number = np.full(len(chunks), -1, np.int64)
    number[used] = np.arange(len(used))
    windows = tuple(
        Window(i, np.asarray(chunks[w], np.int64), int(first[w]), int(last[w]) + 1)
        for i, w in enumerate(used.tolist())
    )
    return EpochPlan(order, windows, chunk_samples, epoch, pad, number[window_of])


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
    """Return the :class:`EpochPlan` of ``rank`` in ``epoch`` (pure), every valid sample once.

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
    return plan_of_windows(windows, real, chunk_samples, epoch, batch_size)
