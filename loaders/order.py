"""Sample order as a pure function of (seed, epoch, rank, world_size).

No global RNG, no state: the same arguments always give the same order, on every rank and after
every restart, which is what makes exact mid-epoch resume and disjoint DDP shards cheap.

The order reads the store chunk by chunk: chunks are permuted, dealt round-robin to ranks, and
the samples of each rank are shuffled inside windows of ``buffer_chunks`` consecutive chunks,
so a reader only ever holds ``buffer_chunks`` chunks while still mixing classes across them.
Given a batch size, the samples of each batch are then served in store order (within the part
of the batch each window serves): a batch holds the same samples, and its rows from one chunk
form one run the reader copies with a single gather.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "batch_seed",
    "chunk_plan",
    "epoch_after",
    "epoch_order",
    "num_batches",
    "samples_per_rank",
    "sort_within_batches",
    "variant_for_epoch",
]

_ORDER, _WINDOW, _VARIANT, _BATCH = 0x0D, 0x1E, 0x7A, 0xB5


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


def _chunk_counts(num_samples: int, chunk_samples: int, valid: npt.NDArray[np.bool_] | None
                  ) -> npt.NDArray[np.int64]:
    n_chunks = -(-num_samples // chunk_samples)
    mask = np.ones(num_samples, bool) if valid is None else np.asarray(valid, bool)
    if mask.shape != (num_samples,):
        raise ValueError(f"valid mask has shape {mask.shape}, want ({num_samples},)")
    padded = np.zeros(n_chunks * chunk_samples, bool)
    padded[:num_samples] = mask
    counts: npt.NDArray[np.int64] = padded.reshape(n_chunks, chunk_samples).sum(1).astype(np.int64)
    return counts


def chunk_plan(num_samples: int, chunk_samples: int, *, seed: int, epoch: int, rank: int = 0,
               world_size: int = 1, shuffle: bool = True) -> npt.NDArray[np.int64]:
    """Return the chunk indices ``rank`` reads in ``epoch``, in reading order."""
    _check(num_samples, chunk_samples, rank, world_size)
    n_chunks = -(-num_samples // chunk_samples)
    perm = _rng(seed, _ORDER, epoch).permutation(n_chunks) if shuffle else np.arange(n_chunks)
    return perm[rank::world_size].astype(np.int64)


def samples_per_rank(num_samples: int, chunk_samples: int, *, seed: int, epoch: int,
                     world_size: int = 1, shuffle: bool = True,
                     valid: npt.NDArray[np.bool_] | None = None) -> int:
    """Return how many samples every rank gets in ``epoch`` (the same on all ranks)."""
    counts = _chunk_counts(num_samples, chunk_samples, valid)
    per_rank = [
        int(counts[chunk_plan(num_samples, chunk_samples, seed=seed, epoch=epoch, rank=r,
                              world_size=world_size, shuffle=shuffle)].sum())
        for r in range(world_size)
    ]
    return min(per_rank)


def epoch_order(num_samples: int, chunk_samples: int, *, seed: int, epoch: int, rank: int = 0,
                world_size: int = 1, shuffle: bool = True, buffer_chunks: int = 8,
                valid: npt.NDArray[np.bool_] | None = None,
                batch_size: int | None = None) -> npt.NDArray[np.int64]:
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

    Returns:
        int64 sample indices; all ranks return the same length: the length of the rank
        with the fewest samples this epoch, so the others leave a remainder out (up to one
        chunk each, more when holes or a partial last chunk fall unevenly).

    Raises:
        ValueError: There are more ranks than chunks holding samples, so every rank would
            get none (use a smaller ``chunk_samples`` or fewer ranks).
    """
    if buffer_chunks < 1:
        raise ValueError(f"buffer_chunks must be >= 1, got {buffer_chunks}")
    chunks = chunk_plan(num_samples, chunk_samples, seed=seed, epoch=epoch, rank=rank,
                        world_size=world_size, shuffle=shuffle)
    keep = samples_per_rank(num_samples, chunk_samples, seed=seed, epoch=epoch,
                            world_size=world_size, shuffle=shuffle, valid=valid)
    if keep == 0 and num_samples > 0:
        raise ValueError(
            f"{world_size} ranks share {-(-num_samples // chunk_samples)} chunks of "
            f"{chunk_samples} samples: some rank gets no sample, so every rank would get none; "
            "build the store with a smaller chunk_samples or use fewer ranks")
    mask = None if valid is None else np.asarray(valid, bool)
    parts = []
    for w, start in enumerate(range(0, len(chunks), buffer_chunks)):
        idx = np.concatenate([
            np.arange(c * chunk_samples, min((c + 1) * chunk_samples, num_samples))
            for c in chunks[start:start + buffer_chunks]
        ])
        if mask is not None:
            idx = idx[mask[idx]]
        if shuffle:
            idx = _rng(seed, _WINDOW, epoch, rank, w).permutation(idx)
        parts.append(idx)
    out = (np.concatenate(parts) if parts else np.zeros(0, np.int64))[:keep].astype(np.int64)
    if batch_size is None:
        return out
    starts = np.cumsum([0, *(len(p) for p in parts)])[:-1]
    return sort_within_batches(out, batch_size, starts)


def sort_within_batches(order: npt.NDArray[np.int64], batch_size: int,
                        window_starts: npt.NDArray[np.int64] | list[int]
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
