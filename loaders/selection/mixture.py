"""The selection of an epoch across stores: a pool per store, proportions, own epochs.

A :class:`Selection` is what every plan is a function of, besides (seed, epoch, rank, world):
one :class:`~loaders.selection.draws.Pool` per store, in one sample space (a mixture's stores
side by side, chunk-aligned: :mod:`loaders.store.selected`), and for a mixture the stores'
proportions. Each store runs through its own epochs at its own pace: the samples a mixture
epoch takes of store ``k`` are the next ones of store ``k``'s endless stream of its own epochs
(:func:`stream`: own epoch ``j`` is its sequence for epoch ``j``), so a store of a tenth of
the samples at half the proportion is served five times an epoch, each time in a new order,
and a large one is gone through over several epochs, no sample twice before every one once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loaders.batching.order import chunk_visits
from loaders.selection.draws import Pool, served

__all__ = ["Selection", "batch_counts", "shares", "stream"]

Indices = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Selection:
    """The pools of the stores a loader serves, and how an epoch mixes them.

    Attributes:
        pools: One per store (members in the loader's sample space).
        num_samples: Slots of the sample space.
        chunk_samples: Samples per chunk of the sample space.
        proportions: Each store's share of an epoch (None for one store).
        mix: ``batch`` or ``epoch`` (see :class:`~loaders.selection.choice.Choice`).
        length: Samples of a mixture's epoch (None: the sum of the stores' own epochs).
    """

    pools: tuple[Pool, ...]
    num_samples: int
    chunk_samples: int
    proportions: tuple[float, ...] | None = None
    mix: str = "batch"
    length: int | None = None

    @property
    def num_chunks(self) -> int:
        """Chunks of the sample space."""
        return -(-self.num_samples // self.chunk_samples)

    @property
    def mixture(self) -> bool:
        """Whether several stores are mixed."""
        return self.proportions is not None

    def epoch_length(self) -> int:
        """Samples a mixture epoch takes (its ``length``, else every store's own epoch once)."""
        return self.length or sum(p.length for p in self.pools)

    def digest(self) -> str:
        """What identifies the selection in a saved state (``"all"``: one store, plain)."""
        if not self.mixture:
            return self.pools[0].digest()
        text = f"{[p.digest() for p in self.pools]}{self.proportions}{self.mix}{self.length}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def own_epochs(self, epoch: int, taken: list[int]) -> list[int]:
        """Each store's own epoch at the start of ``epoch``, taking ``taken[k]`` an epoch."""
        return [epoch * t // p.length for t, p in zip(taken, self.pools, strict=True)]


def shares(total: int, proportions: tuple[float, ...]) -> list[int]:
    """``total`` dealt by ``proportions``, largest remainders first (summing to ``total``)."""
    ideal = np.asarray(proportions) * total
    out = np.floor(ideal).astype(np.int64)
    rest = np.argsort(-(ideal - out), kind="stable")[: total - int(out.sum())]
    out[rest] += 1
    return [int(x) for x in out]


def batch_counts(proportions: tuple[float, ...], batches: int, batch_size: int) -> np.ndarray:
    """``(batches, stores)``: each batch's samples of each store.

    The stores' samples are laid out evenly over the epoch's positions (store ``k``'s
    ``j``-th at ``(j + 1/2) / p_k``) and cut into batches: every batch is within one sample of
    ``p_k * batch_size``, and the counts up to any batch within one of the proportion.
    """
    total = batches * batch_size
    times, owner = [], []
    for k, p in enumerate(proportions):
        n = int(np.ceil(p * total)) + 1
        times.append((np.arange(n) + 0.5) / p)
        owner.append(np.full(n, k))
    by_time = np.lexsort((np.concatenate(owner), np.concatenate(times)))[:total]
    labels = np.concatenate(owner)[by_time].reshape(batches, batch_size)
    return np.stack([(labels == k).sum(1) for k in range(len(proportions))], 1)


def _own_epoch(pool: Pool, *, seed: int, epoch: int, key: tuple[int, ...], shuffle: bool,
               chunk_samples: int, num_chunks: int) -> Indices:  # fmt: skip
    slots = served(pool, seed=seed, epoch=epoch, key=key)
    return chunk_visits(
        slots, chunk_samples, num_chunks, seed=seed, epoch=epoch, shuffle=shuffle, key=key
    )


def stream(sel: Selection, k: int, start: int, length: int, *, seed: int, shuffle: bool) -> Indices:
    """Positions ``[start, start + length)`` of store ``k``'s stream of its own epochs."""
    pool, n = sel.pools[k], sel.pools[k].length
    first, skip = divmod(start, n)
    parts, have, own = [], 0, first
    while have < skip + length:
        seq = _own_epoch(
            pool, seed=seed, epoch=own, key=(k,), shuffle=shuffle,
            chunk_samples=sel.chunk_samples, num_chunks=sel.num_chunks,
        )  # fmt: skip
        parts.append(seq)
        have, own = have + len(seq), own + 1
    joined = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return joined[skip : skip + length].astype(np.int64)
