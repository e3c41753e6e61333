"""The plan of one epoch on one rank: a pure function of (seed, epoch, selection, world).

The one place every loader's order comes from (``ContractLoader.plan``):

1. **Sequence.** The slots the epoch serves (:func:`~loaders.selection.draws.served`), chunk by
   chunk in the epoch's chunk order (:func:`~loaders.batching.order.chunk_visits`); for a
   mixture, each store's next stretch of its own stream (:func:`~loaders.selection.mixture.stream`),
   the stores' chunk visits shuffled together (``mix="epoch"``).
2. **Partitions.** Partition ``p`` of ``P`` takes the ``p``-th equal share of the sequence, in
   windows of ``buffer_chunks`` chunk visits, each shuffled
   (:func:`~loaders.batching.order.cut_sequence`); ``mix="batch"`` cuts each store's stretch
   so, and lays its share into each batch's block of that store (:func:`_batch_mixture`).
3. **Ranks.** Rank ``r`` of ``W`` serves partition ``r`` when the epoch was cut for ``W``
   ranks of its batch size. An epoch resumed on another world size keeps the partitions it
   was cut for (``layout``) and serves each global batch (partition ``p``'s batch ``b`` for
   every ``p``) split over the new ranks (:func:`loaders.selection.elastic.compose`).

A plain selection (one store, every stored sample once) gives exactly
:func:`loaders.batching.plan.epoch_plan`'s plan: states and orders saved before stay valid.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loaders.batching.order import chunk_visits, cut_sequence, join_windows
from loaders.batching.plan import EpochPlan, assemble, plan_of_windows
from loaders.selection.draws import served
from loaders.selection.elastic import compose
from loaders.selection.mixture import Selection, batch_counts, shares, stream

__all__ = ["mixture_taken", "partition_plan", "plan_epoch"]

Indices = npt.NDArray[np.int64]
_MIX = 0x31


def _sequence(sel: Selection, *, seed: int, epoch: int, shuffle: bool) -> Indices:
    """The epoch's sequence of one store, or of a mixture mixed over the epoch."""
    if not sel.mixture:
        slots = served(sel.pools[0], seed=seed, epoch=epoch)
        return chunk_visits(
            slots, sel.chunk_samples, sel.num_chunks, seed=seed, epoch=epoch, shuffle=shuffle
        )
    taken = shares(sel.epoch_length(), sel.proportions or ())
    seq = np.concatenate(
        [stream(sel, k, epoch * t, t, seed=seed, shuffle=shuffle) for k, t in enumerate(taken)]
    )
    if not shuffle or not len(seq):
        return seq
    chunk = seq // sel.chunk_samples
    visit = np.cumsum(np.r_[True, chunk[1:] != chunk[:-1]]) - 1
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, _MIX, epoch])))
    place = rng.permutation(int(visit[-1]) + 1)
    out: Indices = seq[np.argsort(place[visit], kind="stable")]
    return out


def mixture_taken(sel: Selection, parts: int, batch_size: int) -> list[int]:
    """Samples each store gives a mixture epoch (``mix="batch"``: whole batches of all ranks).

    Raises:
        ValueError: The epoch holds no whole batch on every rank.
    """
    if sel.mix == "epoch":
        return shares(sel.epoch_length(), sel.proportions or ())
    batches = sel.epoch_length() // (parts * batch_size)
    if not batches:
        raise ValueError(
            f"a mixture epoch of {sel.epoch_length()} samples holds no batch of {batch_size} on "
            f"each of {parts} ranks: a smaller batch_size, or a larger samples_per_epoch"
        )
    counts = batch_counts(sel.proportions or (), batches, batch_size)
    return [int(x) * parts for x in counts.sum(0)]


def _batch_mixture(
    sel: Selection, *, seed: int, epoch: int, part: int, parts: int, shuffle: bool,
    buffer_chunks: int, batch_size: int,
) -> EpochPlan:  # fmt: skip
    """Partition ``part``'s plan of a mixture in proportion in every batch.

    Each store's stretch is cut into ``parts`` equal shares in windows of its proportion of
    ``buffer_chunks`` chunk visits (so the stores' windows span about the same batches, and a
    reader holds about one plain window's batches); this partition's share fills the store's
    block of each batch (blocks in store order), so a batch reads the windows of every store
    it holds.
    """
    batches = sel.epoch_length() // (parts * batch_size)
    counts = batch_counts(sel.proportions or (), batches, batch_size)
    starts = np.cumsum(counts, 1) - counts  # each store's block within its batch
    n = batches * batch_size
    order, window_of = np.zeros(n, np.int64), np.zeros(n, np.int64)
    chunks: list[Indices] = []
    for k in range(len(sel.pools)):
        taken = int(counts[:, k].sum())
        seq = stream(sel, k, epoch * taken * parts, taken * parts, seed=seed, shuffle=shuffle)
        share = max(1, round(buffer_chunks * (sel.proportions or ())[k]))
        windows, _ = cut_sequence(
            seq, sel.chunk_samples, seed=seed, epoch=epoch, rank=part, world_size=parts,
            shuffle=shuffle, buffer_chunks=share, key=(k,),
        )  # fmt: skip
        first = np.repeat(np.arange(batches) * batch_size + starts[:, k], counts[:, k])
        pos = (
            first
            + np.arange(taken)
            - np.repeat(np.cumsum(counts[:, k]) - counts[:, k], counts[:, k])
        )
        order[pos] = join_windows(windows)
        window_of[pos] = len(chunks) + np.repeat(
            np.arange(len(windows)), [len(s) for _, s in windows]
        )
        chunks += [c for c, _ in windows]
    order = _sorted_in_groups(order, window_of, batch_size)
    return assemble(order, window_of, chunks, np.zeros(n, bool), sel.chunk_samples, epoch)


def _sorted_in_groups(order: Indices, window_of: Indices, batch_size: int) -> Indices:
    """``order`` with the samples of each (batch, window) group in store order, in place."""
    pos = np.arange(len(order))
    batch = pos // batch_size
    out = np.empty_like(order)
    out[np.lexsort((pos, window_of, batch))] = order[np.lexsort((order, window_of, batch))]
    return out


def partition_plan(
    sel: Selection, *, seed: int, epoch: int, part: int, parts: int, shuffle: bool,
    buffer_chunks: int, batch_size: int, pad: bool,
) -> EpochPlan:  # fmt: skip
    """The plan of partition ``part`` of ``parts`` (the rank of an epoch cut for ``parts``)."""
    if sel.mixture and sel.mix == "batch":
        return _batch_mixture(
            sel, seed=seed, epoch=epoch, part=part, parts=parts, shuffle=shuffle,
            buffer_chunks=buffer_chunks, batch_size=batch_size,
        )  # fmt: skip
    seq = _sequence(sel, seed=seed, epoch=epoch, shuffle=shuffle)
    windows, real = cut_sequence(
        seq, sel.chunk_samples, seed=seed, epoch=epoch, rank=part, world_size=parts,
        shuffle=shuffle, buffer_chunks=buffer_chunks, pad=pad,
    )  # fmt: skip
    return plan_of_windows(windows, real, sel.chunk_samples, epoch, batch_size)


def plan_epoch(
    sel: Selection, *, seed: int, epoch: int, rank: int, world_size: int, shuffle: bool,
    buffer_chunks: int, batch_size: int, drop_last: bool,
    layout: tuple[int, int] | None = None,
) -> EpochPlan:  # fmt: skip
    """The plan of ``rank`` of ``world_size`` in ``epoch`` (module docstring).

    Args:
        sel: The selection.
        seed: Order seed.
        epoch: The epoch.
        rank: This rank.
        world_size: Ranks serving now.
        shuffle: Shuffle chunks and windows.
        buffer_chunks: Chunk visits per window.
        batch_size: Samples per batch on each rank.
        drop_last: Even out the ranks by leaving samples out (else marked repeats).
        layout: ``(world size, batch size)`` the epoch was cut for, when it was begun by a run
            of another world size (resumed mid-epoch); None: this one.
    """

    def plan(part: int, parts: int, batch: int) -> EpochPlan:
        return partition_plan(
            sel, seed=seed, epoch=epoch, part=part, parts=parts, shuffle=shuffle,
            buffer_chunks=buffer_chunks, batch_size=batch, pad=not drop_last,
        )  # fmt: skip

    if layout is None or layout == (world_size, batch_size):
        return plan(rank, world_size, batch_size)
    parts, part_batch = layout
    plans = [plan(p, parts, part_batch) for p in range(parts)]
    return compose(plans, part_batch, rank, world_size, drop_last)
