"""An epoch begun at one world size, served on another: the global order kept.

An epoch is cut into ``P`` partitions (the ranks of the run that began it), each served in
batches of ``B``; global batch ``b`` is every partition's batch ``b``, partition after
partition (``P * B`` samples). Resumed on ``W`` ranks with the global batch kept (``W`` divides
``P * B``), rank ``r`` serves positions ``[r * P * B / W, (r + 1) * P * B / W)`` of every
global batch from the saved one on: the remaining samples of the epoch exactly once, in the
same global batches in the same order, every rank the same number of batches. With
``drop_last=False`` the last, smaller global batch is split into ``ceil(m / W)`` a rank, the
short ranks evened out by repeats of its first samples, marked ``is_pad``. Each rank reads the
windows of the partitions it serves, and of those only the chunks its samples lie in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from loaders.batching.plan import EpochPlan, assemble

__all__ = ["compose"]

Indices = npt.NDArray[np.int64]


def _window_chunks(
    order: Indices, window_of: Indices, windows: int, chunk_samples: int
) -> list[Indices]:
    """Per window: the chunks its positions' samples lie in, each once."""
    chunk = order // chunk_samples
    span = int(chunk.max(initial=0)) + 1
    keys = np.unique(window_of * span + chunk)
    bounds = np.searchsorted(keys // span, np.arange(windows + 1))
    return [(keys[bounds[w] : bounds[w + 1]] % span).astype(np.int64) for w in range(windows)]


def compose(
    plans: Sequence[EpochPlan], part_batch: int, rank: int, world_size: int, drop_last: bool
) -> EpochPlan:
    """Rank ``rank`` of ``world_size``'s plan of an epoch cut into ``plans`` (module docstring).

    Raises:
        ValueError: ``world_size`` does not divide the global batch, or the partitions differ
            in length.
    """
    parts, n = len(plans), len(plans[0].order)
    whole = parts * part_batch
    if whole % world_size or {len(p.order) for p in plans} != {n}:
        raise ValueError(
            f"{world_size} ranks cannot share global batches of {whole} ({parts} x {part_batch})"
        )
    size, full = whole // world_size, n // part_batch
    tail = 0 if drop_last else n - full * part_batch
    piece = -(-parts * tail // world_size)
    i = np.arange(full * part_batch + tail)
    in_full = i < full * part_batch
    parts_of, samples, windows, pads, places = [], [], [], [], []
    base = 0
    for p, plan in enumerate(plans):
        at = np.where(in_full, p * part_batch + i % part_batch, p * tail + i - full * part_batch)
        width = np.where(in_full, size, max(piece, 1))
        mine = at // width == rank
        local = np.where(in_full, (i // part_batch) * size, full * size) + at % width
        places.append(local[mine])
        samples.append(plan.order[i[mine]])
        windows.append(plan.window_of[i[mine]] + base)
        pads.append(plan.pad[i[mine]])
        parts_of.append((plan, base))
        base += len(plan.windows)
    total = full * size + piece
    order, window_of = np.zeros(total, np.int64), np.zeros(total, np.int64)
    pad = np.ones(total, bool)
    place = np.concatenate(places)
    order[place], window_of[place] = np.concatenate(samples), np.concatenate(windows)
    pad[place] = np.concatenate(pads)
    missing = np.setdiff1d(np.arange(total), place)  # the short last piece: repeats
    if len(missing):
        fill = _tail_repeats(plans, full * part_batch, tail, base_of=[b for _, b in parts_of])
        order[missing] = fill[0][: len(missing)]
        window_of[missing] = fill[1][: len(missing)]
    chunks = _window_chunks(order, window_of, base, plans[0].chunk_samples)
    return assemble(order, window_of, chunks, pad, plans[0].chunk_samples, plans[0].epoch)


def _tail_repeats(
    plans: Sequence[EpochPlan], start: int, tail: int, base_of: list[int]
) -> tuple[Indices, Indices]:
    """The last global batch's samples and windows in order, cycled: what evens out its split."""
    order = np.concatenate([p.order[start : start + tail] for p in plans])
    window = np.concatenate(
        [p.window_of[start : start + tail] + b for p, b in zip(plans, base_of, strict=True)]
    )
    reps = -(-len(plans) * tail // max(len(order), 1)) + 1
    return np.tile(order, reps), np.tile(window, reps)
