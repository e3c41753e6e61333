"""The user's choice of samples, parsed once: subset, split, weights, balance, mixture.

:class:`Choice` holds the selection options every loader of the contract takes (``StoreLoader``,
the DALI loaders and through them ``loaders.tf`` and ``loaders.jax``), checked when the loader
is made; :mod:`loaders.selection.resolve` turns it into the samples and weights of each store
(:class:`~loaders.selection.draws.Pool`) once the store is open.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from precompute.splits import Split

__all__ = ["MIX_MODES", "Choice"]

MIX_MODES = ("batch", "epoch")
Subset = Sequence[int] | np.ndarray | Callable[[Mapping[str, Any]], Any] | None


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
    return int(value)


def _proportions(value: object) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise ValueError(f"proportions must be a sequence of numbers, one per store: {value!r}")
    out = []
    for p in value:
        if isinstance(p, bool) or not isinstance(p, (int, float, np.number)):
            raise ValueError(f"proportions must be numbers > 0, got {p!r} in {value!r}")
        if not (math.isfinite(float(p)) and float(p) > 0):
            raise ValueError(f"proportions must be finite numbers > 0, got {p!r} in {value!r}")
        out.append(float(p))
    total = sum(out)
    return tuple(p / total for p in out)


@dataclass(frozen=True, eq=False)
class Choice:
    """Which samples an epoch serves, and how often (``docs/loaders.md``, "Choosing samples").

    Args:
        subset: Indices (slots), a boolean mask over the slots, or a predicate
            ``f(samples) -> mask`` over the stored per-sample fields (``samples["label"]``),
            ``samples["key"]`` (source keys) and ``samples["index"]``.
        split: Serve the named part of the store's split (``"val"``): the one recorded with
            the store, or the one ``splits`` deals.
        splits: A :class:`~precompute.splits.Split` rule dealt at open (not recorded).
        weights: One sampling weight per slot (>= 0).
        balance: A field with classes (``"label"``, ``"mask"``, ``"boxes"``): weights that
            make each class the reason for an equal share of draws (a class chosen uniformly,
            then a sample in proportion to its share of the class: a label's classes are
            drawn equally often; a mask's drawn slice brings all its pixels, so pixels are
            not balanced).
        repeat_factor: With ``balance``: repeat-factor sampling (LVIS) with this threshold
            instead of weights: a sample is served ``max(1, sqrt(t / f_c))`` times an epoch
            for the rarest class ``c`` it holds (``f_c``: the share of samples holding ``c``).
        replacement: Weighted draws with replacement (default) or without.
        samples_per_epoch: Draws an epoch (default: the selected samples' count); for a
            mixture, the epoch's length.
        proportions: One share per store of a mixture (normalised).
        mix: ``"batch"``: every batch holds the stores in proportion (within one sample);
            ``"epoch"``: the epoch does, batches vary.

    Raises:
        ValueError: An option out of range or options that exclude each other (named).
    """

    subset: Subset = None
    split: str | None = None
    splits: Split | Mapping[str, Any] | None = None
    weights: Any = None
    balance: str | None = None
    repeat_factor: float | None = None
    replacement: bool = True
    samples_per_epoch: int | None = None
    proportions: Sequence[float] | None = None
    mix: str = "batch"

    def __post_init__(self) -> None:
        if self.splits is not None and not isinstance(self.splits, Split):
            object.__setattr__(self, "splits", Split.from_dict(self.splits))
        if self.split is not None and not isinstance(self.split, str):
            raise ValueError(f"split must be a part's name (a str), got {self.split!r}")
        if self.splits is not None and self.split is None:
            raise ValueError("splits= deals the store into parts; say which one with split=")
        if self.weights is not None and self.balance is not None:
            raise ValueError("give weights= or balance=, not both")
        if self.balance is not None and not isinstance(self.balance, str):
            raise ValueError(f"balance must be a field's name, got {self.balance!r}")
        object.__setattr__(
            self, "samples_per_epoch", _positive_int("samples_per_epoch", self.samples_per_epoch)
        )
        object.__setattr__(self, "proportions", _proportions(self.proportions))
        object.__setattr__(self, "replacement", bool(self.replacement))
        if self.mix not in MIX_MODES:
            raise ValueError(f"mix must be one of {MIX_MODES}, got {self.mix!r}")
        self._check_repeat()

    def _check_repeat(self) -> None:
        t = self.repeat_factor
        if t is None:
            return
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
            raise ValueError(f"repeat_factor must be a threshold in (0, 1], got {t!r}")
        if self.balance is None:
            raise ValueError("repeat_factor needs balance=FIELD: the field whose classes count")
        if self.samples_per_epoch is not None or not self.replacement:
            raise ValueError(
                "repeat_factor fixes how often each sample is served: it takes no "
                "samples_per_epoch and no replacement=False"
            )

    @property
    def weighted(self) -> bool:
        """Whether an epoch draws (weights, balance or a number of draws).

        Otherwise it serves every selected sample once (or by its repeat factor).
        """
        return (
            self.weights is not None
            or (self.balance is not None and self.repeat_factor is None)
            or self.samples_per_epoch is not None
        )
