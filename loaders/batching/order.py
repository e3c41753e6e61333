"""Sample order as a pure function of (seed, epoch, rank, world_size).

No global RNG, no state: the same arguments always give the same order, on every rank and after
every restart, which is what makes exact mid-epoch resume and disjoint DDP shards cheap.

The order reads the store chunk by chunk. Each epoch permutes the chunks; the epoch's
*sequence* is every valid sample once, chunk by chunk in that order (store order inside a
chunk). Rank ``r`` serves positions ``[r * share, (r + 1) * share)`` of the sequence, so ranks
are disjoint, equally long, and share at most the chunk on each boundary. ``share`` is
``total // world_size`` (``total % world_size < world_size`` samples are left out this epoch:
drawn from the whole sequence by (seed, epoch) when shuffling, so every sample is served
equally often over epochs, even in a store of one chunk; the last ones of the sequence
without shuffling) or, with ``pad=True``, ``ceil(total / world_size)``: then positions
past the end wrap around to the start of the sequence, fewer than ``world_size`` repeats in
all, always the last positions of a rank's order (:func:`rank_windows` says how many), so a
loader can mark them and every sample is served exactly once otherwise. The samples of each
rank are shuffled inside windows of ``buffer_chunks`` consecutive chunks, so a reader only
ever holds ``buffer_chunks`` chunks while still mixing classes across them. Given a batch
size, the samples of each batch are then served in store order (within the part of the batch
each window serves): a batch holds the same samples, and its rows from one chunk form one run
the reader copies with a single gather.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "ORDER_VERSION",
    "RankWindow",
    "batch_seed",
    "chunk_visits",
    "cut_sequence",
    "epoch_after",
    "epoch_order",
    "epoch_sequence",
    "join_windows",
    "num_batches",
    "rank_windows",
    "samples_per_rank",
    "sort_within_batches",
    "variant_for_epoch",
]

_ORDER, _WINDOW, _VARIANT, _BATCH, _DROP = 0x0D, 0x1E, 0x7A, 0xB5, 0x5C
ORDER_VERSION = 2
"""Version of the order these functions give; a loader state saved under another is refused.

2: without ``pad``, the samples several ranks leave out are drawn from the whole epoch, not
the tail of the chunk read last.
"""
Indices = npt.NDArray[np.int64]
RankWindow = tuple[Indices, Indices]  # (chunks read, samples served in serving order)


def _rng(*key: int) -> np.random.Generator:
    """Return a generator keyed by non-negative integers (no global state)."""
    if any(k < 0 for k in key):
        raise ValueError(f"seed, epoch, rank must be >= 0, got {key}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(key))))


def _check(num_samples: int, chunk_samples: int, rank: int, world_size: int) -> None:
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    if chunk_samples < 1:
        raise ValueError(f"chunk_samples must be >= 1, got {chunk_samples}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")


def epoch_sequence(
    num_samples: int,
    chunk_samples: int,
    *,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    valid: npt.NDArray[np.bool_] | None = None,
) -> Indices:
    """Return every valid sample once: chunk by chunk in ``epoch``'s chunk order.

    Args:
        num_samples: Number of sample slots N in the store (holes included).
        chunk_samples: Samples per inner chunk of the store.
        seed: Order seed.
        epoch: Epoch number; each epoch permutes the chunks differently.
        shuffle: False keeps the chunks in store order (evaluation).
        valid: Optional mask of real samples; holes (skipped inputs) are left out.
    """
    _check(num_samples, chunk_samples, 0, 1)
    if valid is not None and np.shape(valid) != (num_samples,):
        raise ValueError(f"valid mask has shape {np.shape(valid)}, want ({num_samples},)")
    served = (
        np.arange(num_samples, dtype=np.int64)
        if valid is None
        else np.flatnonzero(np.asarray(valid, bool)).astype(np.int64)
    )
    n_chunks = -(-num_samples // chunk_samples)
    return chunk_visits(served, chunk_samples, n_chunks, seed=seed, epoch=epoch, shuffle=shuffle)


def chunk_visits(
    served: Indices,
    chunk_samples: int,
    num_chunks: int,
    *,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    key: tuple[int, ...] = (),
) -> Indices:
    """Return ``served`` chunk by chunk in ``epoch``'s chunk order, one visit per chunk.

    ``served`` holds ascending slots, a slot once per time it is served; a visit keeps them
    ascending.

    The chunk order is the permutation of all ``num_chunks`` chunks drawn from (seed, epoch)
    (and ``key``, which a mixture's stores add to draw apart), so a selection of the samples
    is served in the order the whole store would be, its other samples left out.
    """
    if not shuffle or len(served) == 0:
        return served.astype(np.int64)
    perm = _rng(seed, _ORDER, epoch, *key).permutation(num_chunks)
    place = np.empty(num_chunks, np.int64)
    place[perm] = np.arange(num_chunks)
    seq: Indices = served[np.argsort(place[served // chunk_samples], kind="stable")]
    return seq.astype(np.int64)


def samples_per_rank(total: int, world_size: int = 1, *, pad: bool = False) -> int:
    """Return how many positions every rank serves of a sequence of ``total`` samples.

    ``total // world_size``, or with ``pad`` ``ceil(total / world_size)`` (the positions past
    ``total`` repeat samples and are marked as such).
    """
    if total < 0 or world_size < 1:
        raise ValueError(f"need total >= 0 and world_size >= 1, got {total=} {world_size=}")
    return -(-total // world_size) if pad else total // world_size


def _split(samples: Indices, chunk_samples: int, buffer_chunks: int) -> list[RankWindow]:
    """Cut a run of the sequence into windows of ``buffer_chunks`` consecutive chunks."""
    if len(samples) == 0:
        return []
    chunk = samples // chunk_samples
    first = np.r_[True, chunk[1:] != chunk[:-1]]  # where a new chunk starts
    window = (np.cumsum(first) - 1) // buffer_chunks
    cuts = np.flatnonzero(np.diff(window)) + 1
    return [
        (_once(c[f]), part)
        for c, f, part in zip(
            np.split(chunk, cuts), np.split(first, cuts), np.split(samples, cuts), strict=True
        )
    ]


def _once(chunks: Indices) -> Indices:
    """``chunks`` in visit order, each once.

    A window may visit a chunk twice: a mixture's store passing from one of its epochs to the
    next, a padding repeat.
    """
    if len(np.unique(chunks)) == len(chunks):
        return chunks
    _, first = np.unique(chunks, return_index=True)
    return chunks[np.sort(first)]


def rank_windows(
    num_samples: int,
    chunk_samples: int,
    *,
    seed: int,
    epoch: int,
    rank: int = 0,
    world_size: int = 1,
    shuffle: bool = True,
    buffer_chunks: int = 8,
    valid: npt.NDArray[np.bool_] | None = None,
    pad: bool = False,
) -> tuple[list[RankWindow], int]:
    """Return the windows ``rank`` serves in ``epoch`` and how many leading positions are real.

    Arguments as for :func:`epoch_order`. Each window is ``(chunks, samples)``: the chunks it
    reads and the samples it serves, shuffled when ``shuffle``. The real samples come first;
    with ``pad``, the positions from the returned count on are repeats (their own windows).

    Raises:
        ValueError: Without ``pad``, there are fewer samples than ranks, so every rank would
            get none.
    """
    _check(num_samples, chunk_samples, rank, world_size)
    seq = epoch_sequence(
        num_samples, chunk_samples, seed=seed, epoch=epoch, shuffle=shuffle, valid=valid
    )
    return cut_sequence(
        seq,
        chunk_samples,
        seed=seed,
        epoch=epoch,
        rank=rank,
        world_size=world_size,
        shuffle=shuffle,
        buffer_chunks=buffer_chunks,
        pad=pad,
    )


def cut_sequence(
    seq: Indices,
    chunk_samples: int,
    *,
    seed: int,
    epoch: int,
    rank: int = 0,
    world_size: int = 1,
    shuffle: bool = True,
    buffer_chunks: int = 8,
    pad: bool = False,
    key: tuple[int, ...] = (),
) -> tuple[list[RankWindow], int]:
    """Return the windows rank ``rank`` serves of the epoch's sequence ``seq``, and its real count.

    ``seq`` is any sequence in chunk visits (:func:`epoch_sequence`, or a selection's, whose
    slots may repeat): rank ``r`` takes its ``r``-th equal share, cut into windows of
    ``buffer_chunks`` chunk visits, each shuffled by (seed, epoch, rank, window, ``key``).
    Arguments otherwise as for :func:`rank_windows`.

    Raises:
        ValueError: Without ``pad``, fewer positions than ranks.
    """
    _check(0, chunk_samples, rank, world_size)
    if buffer_chunks < 1:
        raise ValueError(f"buffer_chunks must be >= 1, got {buffer_chunks}")
    total, share = len(seq), samples_per_rank(len(seq), world_size, pad=pad)
    if share == 0 and total > 0:
        raise ValueError(
            f"{world_size} ranks share {total} samples: every rank would get none; use fewer "
            "ranks, or pad the last ranks with marked repeats (the loaders' drop_last=False)"
        )
    if not pad and shuffle and total % world_size:
        left_out = _rng(seed, _DROP, epoch, *key).choice(total, total % world_size, replace=False)
        seq, total = np.delete(seq, left_out), total - total % world_size
    lo, hi = rank * share, (rank + 1) * share
    real = seq[lo : min(hi, total)]
    repeats = seq[np.arange(max(lo, total), hi) % max(total, 1)]
    windows = _split(real, chunk_samples, buffer_chunks) + _split(
        repeats, chunk_samples, buffer_chunks
    )
    if shuffle:
        windows = [
            (c, _rng(seed, _WINDOW, epoch, rank, w, *key).permutation(s))
            for w, (c, s) in enumerate(windows)
        ]
    return windows, len(real)


def join_windows(windows: list[RankWindow], batch_size: int | None = None) -> Indices:
    """Return the order the windows serve; with ``batch_size``, sorted inside each batch.

    See :func:`sort_within_batches`: each (batch, window) segment is sorted by sample index.
    """
    parts = [s for _, s in windows]
    out = (np.concatenate(parts) if parts else np.zeros(0, np.int64)).astype(np.int64)
    if batch_size is None:
        return out
    return sort_within_batches(out, batch_size, np.cumsum([0, *map(len, parts)])[:-1])


def epoch_order(
    num_samples: int,
    chunk_samples: int,
    *,
    seed: int,
    epoch: int,
    rank: int = 0,
    world_size: int = 1,
    shuffle: bool = True,
    buffer_chunks: int = 8,
    valid: npt.NDArray[np.bool_] | None = None,
    batch_size: int | None = None,
    pad: bool = False,
) -> Indices:
    """Return the sample indices ``rank`` visits in ``epoch``, in order.

    Args:
        num_samples: Number of sample slots N in the store (holes included).
        chunk_samples: Samples per inner chunk of the store.
        seed: Order seed.
        epoch: Epoch number; each epoch is a different permutation.
        rank: This process's rank.
        world_size: Number of ranks; ranks get disjoint samples and equally many of them.
        shuffle: False gives chunk order and sample order unchanged (evaluation).
        buffer_chunks: Samples are shuffled within windows of this many consecutive chunks.
        valid: Optional mask of real samples; holes (skipped inputs) are left out.
        batch_size: When given, sort each batch's samples by store index within each window
            it spans (see :func:`sort_within_batches`); ``None`` keeps the shuffled positions.
        pad: False: every rank gets ``total // world_size`` samples and the epoch leaves
            ``total % world_size`` samples out (drawn by (seed, epoch) when ``shuffle``, else
            the last of its sequence). True: every rank gets
            ``ceil(total / world_size)``; the last ranks end with repeats of the first samples
            of the sequence (fewer than ``world_size`` in all; :func:`rank_windows` counts
            them), so the ranks together serve every sample.

    Returns:
        int64 sample indices, the same length on every rank.

    Raises:
        ValueError: Without ``pad``, fewer samples than ranks (every rank would get none).
    """
    windows, _ = rank_windows(
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
    return join_windows(windows, batch_size)


def sort_within_batches(
    order: npt.NDArray[np.int64], batch_size: int, window_starts: npt.NDArray[np.int64] | list[int]
) -> npt.NDArray[np.int64]:
    """Return ``order`` with each (batch, window) segment sorted by sample index.

    Segments are cut at every multiple of ``batch_size`` and at every window start, so each
    batch keeps exactly its samples and each window keeps exactly its positions; only the
    places of samples inside a segment change. Since a store's samples sit in it in a seeded
    random order (``precompute`` shuffles slots), store order carries no information.

    Raises:
        ValueError: ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    positions = np.arange(len(order))
    window = np.searchsorted(np.asarray(window_starts, np.int64), positions, side="right")
    segment = (positions // batch_size) * (len(window_starts) + 1) + window
    return order[np.lexsort((order, segment))].astype(np.int64)


def num_batches(num_samples_rank: int, batch_size: int, drop_last: bool) -> int:
    """Return the number of batches of ``batch_size`` in ``num_samples_rank`` samples."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return num_samples_rank // batch_size if drop_last else -(-num_samples_rank // batch_size)


def epoch_after(epoch: int, served: int, total: int) -> tuple[int, int]:
    """Return the ``(epoch, batch)`` the next iteration starts at, ``served`` of ``total`` in.

    A pass that delivered all ``total`` batches is complete, whether or not its iterator was
    run to its end (a training loop that takes ``len(loader)`` batches never asks for more),
    so the next iteration starts the next epoch from its first batch.
    """
    return (epoch + 1, 0) if served >= total else (epoch, served)


def variant_for_epoch(seed: int, epoch: int, variants: int) -> int:
    """Return which stored variant to serve in ``epoch``.

    Every block of ``variants`` consecutive epochs serves each variant once, in an order that
    depends on the seed.
    """
    if variants < 1:
        raise ValueError(f"variants must be >= 1, got {variants}")
    if variants == 1:
        return 0
    perm = _rng(seed, _VARIANT, epoch // variants).permutation(variants)
    return int(perm[epoch % variants])


def batch_seed(seed: int, epoch: int, rank: int, batch: int) -> int:
    """Return the seed of the augmentation generator of one batch (a 63-bit integer).

    A pure function of (seed, epoch, rank, batch index), so a resumed run draws the same
    augmentation randomness for the same batch.
    """
    return int(_rng(seed, _BATCH, epoch, rank, batch).integers(0, 2**63 - 1))
