"""Sampling weights and repeat factors from the classes each sample holds.

Both read :class:`~precompute.fields.ClassCounts` (what a field's kind counts: a label's class,
a mask's pixels per class, boxes per class) over the selected samples only:

* :func:`balanced_weights`: each sample's classes as shares of it (a mask of 90% background and
  10% tumour is 0.9 and 0.1 of a sample), each class's total share ``M_c`` over the selection,
  and the weight ``sum_c share_ic / M_c``. A draw is exactly a class chosen uniformly among the
  ``C`` held, then a sample with probability ``share_ic / M_c``: each class is the reason for
  ``1/C`` of the draws, so with one class a sample every class is drawn equally often. A drawn
  mask brings all its classes (its background too): pixels are not balanced
  (``docs/loaders.md``, "Weighted and class-balanced sampling", measures it).
* :func:`repeat_factors`: LVIS's repeat-factor sampling: ``f_c`` the share of samples holding
  class ``c``, ``r_c = max(1, sqrt(t / f_c))``, a sample's factor the largest ``r_c`` of its
  classes (1 for one holding none).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from precompute.fields import ClassCounts

__all__ = ["balanced_weights", "repeat_factors"]

Floats = npt.NDArray[np.float64]


def _rows(counts: ClassCounts, members: npt.NDArray[np.int64]) -> tuple[np.ndarray, ...]:
    """The triplets of the members: (member position, class, count)."""
    at = np.searchsorted(members, counts.samples)
    inside = (at < len(members)) & (members[np.minimum(at, len(members) - 1)] == counts.samples)
    keep = inside & (counts.counts > 0)
    return at[keep], counts.classes[keep], counts.counts[keep].astype(np.float64)


def balanced_weights(counts: ClassCounts, members: npt.NDArray[np.int64]) -> Floats:
    """One weight per member: each class the reason for an equal share of draws (module doc).

    Raises:
        ValueError: No member holds any class.
    """
    member, cls, amount = _rows(counts, members)
    if not len(member):
        raise ValueError("balance: no selected sample holds any class")
    totals = np.bincount(member, weights=amount, minlength=len(members))
    share = amount / totals[member]
    mass = np.bincount(cls, weights=share, minlength=counts.num_classes)
    weights = np.bincount(member, weights=share / mass[cls], minlength=len(members))
    return weights.astype(np.float64)


def repeat_factors(counts: ClassCounts, members: npt.NDArray[np.int64], threshold: float) -> Floats:
    """Each member's repeat factor under ``threshold`` (module docstring)."""
    member, cls, _ = _rows(counts, members)
    holding = np.unique(np.stack([member, cls], 1), axis=0) if len(member) else np.zeros((0, 2))
    freq = np.bincount(holding[:, 1].astype(np.int64), minlength=counts.num_classes)
    share = freq / max(len(members), 1)
    with np.errstate(divide="ignore"):
        per_class = np.maximum(1.0, np.sqrt(threshold / np.where(share > 0, share, np.inf)))
    factors = np.ones(len(members), np.float64)
    if len(holding):
        np.maximum.at(
            factors, holding[:, 0].astype(np.int64), per_class[holding[:, 1].astype(np.int64)]
        )
    return factors
