"""How often each selected sample is served in an epoch: a pure function of (seed, epoch, pool).

A :class:`Pool` is one store's resolved selection: its members (sorted slots) and either
sampling weights or repeat factors. :func:`served` gives the slots an epoch serves, ascending,
a slot once per time it is served:

* every member once (no weights, no draw count): the store's plain epoch;
* weighted, with replacement: ``samples_per_epoch`` independent draws (a multinomial of the
  weights): each sample's count over the epoch is exactly that of
  ``WeightedRandomSampler(weights, num_samples, replacement=True)``;
* weighted, without replacement: ``samples_per_epoch`` distinct members, drawn in proportion
  to their weights (Efraimidis-Spirakis keys ``u ** (1 / w)``), as ``torch.multinomial``
  without replacement draws them;
* repeat factors: ``floor(r)`` times, once more with probability ``r - floor(r)`` (LVIS).

The draws are exact. What reading whole chunks changes is only *where* the draws are served:
:func:`loaders.batching.order.chunk_visits` serves them chunk by chunk, so the repeats of a
sample sit in one window of ``buffer_chunks`` chunks (``docs/loaders.md``, "Choosing samples").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Pool", "served"]

Indices = npt.NDArray[np.int64]
_DRAW = 0xD7


@dataclass(frozen=True, eq=False)
class Pool:
    """One store's selection: which slots, with which weights or repeat factors.

    Attributes:
        members: The selected slots, ascending, each once.
        weights: Per member sampling weight (>= 0), or None.
        repeats: Per member repeat factor (>= 1), or None.
        replacement: Weighted draws with replacement.
        draws: Draws an epoch when weighted (None: every member once, or by its repeats).
        plain: Every stored sample once: the store's plain epoch.
    """

    members: Indices
    weights: npt.NDArray[np.float64] | None = None
    repeats: npt.NDArray[np.float64] | None = None
    replacement: bool = True
    draws: int | None = None
    plain: bool = False

    @property
    def length(self) -> int:
        """Samples an epoch serves (expected, with repeat factors)."""
        if self.draws is not None:
            return self.draws
        if self.repeats is not None:
            return round(float(self.repeats.sum()))
        return len(self.members)

    def digest(self) -> str:
        """What identifies the selection in a saved state (``"all"`` for the plain epoch)."""
        if self.plain:
            return "all"
        h = hashlib.sha256(self.members.astype("<i8").tobytes())
        for extra in (self.weights, self.repeats):
            h.update(b"-" if extra is None else np.asarray(extra, "<f8").tobytes())
        h.update(f"{self.replacement},{self.draws}".encode())
        return h.hexdigest()[:16]


def _rng(seed: int, epoch: int, key: tuple[int, ...]) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, _DRAW, epoch, *key])))


def served(pool: Pool, *, seed: int, epoch: int, key: tuple[int, ...] = ()) -> Indices:
    """The slots ``epoch`` serves, ascending, each as often as it is served (module docstring)."""
    if pool.repeats is not None:
        whole = np.floor(pool.repeats)
        extra = _rng(seed, epoch, key).random(len(pool.members)) < pool.repeats - whole
        return np.repeat(pool.members, (whole + extra).astype(np.int64))
    if pool.draws is None:
        return pool.members
    weights = np.ones(len(pool.members)) if pool.weights is None else pool.weights
    rng = _rng(seed, epoch, key)
    if pool.replacement:
        counts = rng.multinomial(pool.draws, weights / weights.sum())
        return np.repeat(pool.members, counts)
    with np.errstate(divide="ignore"):
        keys = np.log(rng.random(len(weights))) / weights  # -inf for a weight of 0
    chosen = np.argpartition(-keys, pool.draws - 1)[: pool.draws]
    return np.sort(pool.members[chosen])
