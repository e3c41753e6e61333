"""Per-band statistics of a store, folded from per-shard partials (Chan's parallel merge).

Each shard task computes a :func:`partial` of its samples; the driver folds them with
:func:`merge` in any grouping and gets, up to float64 rounding, the statistics of all the
data at once: per band the count of values used, the mean, ``M2`` (the sum of squared
deviations from the mean), min and max, all float64. ``partial`` is two-pass (the mean
first, then the deviations from it), and ``merge`` adds ``M2`` terms with the correction
``delta**2 * na * nb / n`` (Chan, Golub and LeVeque), so values far from zero (``1e6 +
noise``) keep their variance, which a sum of squares minus a squared sum loses to
cancellation. ``std`` is the population standard deviation ``sqrt(M2 / count)``, the one a
normalisation divides by.

Values left out: pixels whose ``valid_mask`` is False (a letterbox border, a hole) and any
NaN/inf value (its band only). :meth:`BandStats.to_dict` is JSON-safe (a band with no value
has ``null`` statistics) and :meth:`BandStats.from_dict` reads it back exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from precompute.errors import SpecError

__all__ = ["BandStats", "merge", "partial"]

_KEYS = ("count", "mean", "m2", "min", "max")


@dataclass(frozen=True, eq=False)
class BandStats:
    """Statistics of each of ``C`` bands: ``(C,)`` arrays (``count`` int64, others float64)."""

    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @property
    def bands(self) -> int:
        """The number of bands ``C``."""
        return int(self.count.shape[0])

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation per band (NaN for a band with no value)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.sqrt(self.m2 / self.count))

    def to_dict(self) -> dict[str, Any]:
        """``{"count", "mean", "std", "min", "max", "m2"}`` lists, JSON-safe (``None`` if empty)."""
        empty = self.count == 0
        out: dict[str, Any] = {"count": [int(n) for n in self.count]}
        for key, values in (("mean", self.mean), ("std", self.std), ("min", self.min),
                            ("max", self.max), ("m2", self.m2)):  # fmt: skip
            out[key] = [None if e else float(v) for v, e in zip(values, empty, strict=True)]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BandStats:
        """Read a dict made by :meth:`to_dict` back.

        Raises:
            SpecError: A key missing, or lists of different lengths.
        """
        missing = [k for k in _KEYS if k not in data]
        if missing:
            raise SpecError(f"band statistics lack {missing}; they need {list(_KEYS)}")
        lengths = {k: len(data[k]) for k in _KEYS}
        if len(set(lengths.values())) != 1:
            raise SpecError(f"band statistics lists differ in length: {lengths}")
        count = np.asarray(data["count"], dtype=np.int64)
        empty = count == 0

        def column(key: str, fill: float) -> np.ndarray:
            return np.array(
                [fill if e else float(v) for v, e in zip(data[key], empty, strict=True)]
            )

        return cls(count, column("mean", 0.0), column("m2", 0.0), column("min", np.inf),
                   column("max", -np.inf))  # fmt: skip


def partial(cube_batch: np.ndarray, valid_mask: np.ndarray | None = None) -> BandStats:
    """Statistics of the values of ``cube_batch`` (``(..., C)``: bands last).

    Args:
        cube_batch: Any number of leading axes (samples, rows, columns), bands last.
        valid_mask: Boolean of shape ``cube_batch.shape[:-1]``: False leaves a pixel out.

    Raises:
        SpecError: A mask of another shape.
    """
    x = np.asarray(cube_batch, dtype=np.float64).reshape(-1, cube_batch.shape[-1])
    use = np.isfinite(x)
    if valid_mask is not None:
        if valid_mask.shape != cube_batch.shape[:-1]:
            raise SpecError(
                f"valid_mask has shape {list(valid_mask.shape)}; the batch's pixels are "
                f"{list(cube_batch.shape[:-1])}"
            )
        use &= valid_mask.reshape(-1, 1).astype(bool)
    count = use.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, np.where(use, x, 0.0).sum(axis=0) / count, 0.0)
    m2 = (np.where(use, x - mean, 0.0) ** 2).sum(axis=0)
    lo = np.where(use, x, np.inf).min(axis=0, initial=np.inf)
    hi = np.where(use, x, -np.inf).max(axis=0, initial=-np.inf)
    return BandStats(count.astype(np.int64), mean, m2, lo, hi)


def merge(a: BandStats, b: BandStats) -> BandStats:
    """The statistics of the union of the values behind ``a`` and ``b`` (Chan's merge).

    Raises:
        SpecError: ``a`` and ``b`` have different band counts.
    """
    if a.bands != b.bands:
        raise SpecError(f"cannot merge statistics of {a.bands} and {b.bands} bands")
    n = a.count + b.count
    safe = np.maximum(n, 1)
    delta = b.mean - a.mean
    mean = np.where(n > 0, a.mean + delta * (b.count / safe), 0.0)
    m2 = a.m2 + b.m2 + delta**2 * (a.count * (b.count / safe))
    return BandStats(n, mean, m2, np.minimum(a.min, b.min), np.maximum(a.max, b.max))
