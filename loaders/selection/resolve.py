"""A :class:`~loaders.selection.choice.Choice` against one store: its :class:`Pool`.

The members are the stored samples (holes left out) in the subset and in the split; the
weights come from ``weights=`` or ``balance=`` (:mod:`loaders.selection.weights`), the repeat
factors from ``repeat_factor=``. Every refusal names the store and the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaders.selection.choice import Choice
from loaders.selection.draws import Pool
from loaders.selection.table import SamplesView, SampleTable
from loaders.selection.weights import balanced_weights, repeat_factors
from precompute.errors import SpecError
from precompute.splits import Split, assign, key_groups

__all__ = ["resolve_pool", "split_mask", "subset_mask"]

Mask = npt.NDArray[np.bool_]


def subset_mask(subset: Any, table: SampleTable) -> Mask:
    """The slots ``subset`` names: indices, a boolean mask, or a predicate's mask.

    Raises:
        ValueError: A mask of another length, an index out of range or given twice, or a
            predicate that returns no boolean mask of every slot.
    """
    n = table.num_samples
    if subset is None:
        return np.ones(n, bool)
    if callable(subset):
        got = np.asarray(subset(SamplesView(table)))
        if got.dtype != bool or got.shape != (n,):
            raise ValueError(
                f"subset predicate must return a boolean mask of the {n} slots of "
                f"{table.where}, got {got.dtype} {got.shape}"
            )
        return got
    got = np.asarray(subset)
    if got.dtype == bool:
        if got.shape != (n,):
            raise ValueError(f"subset mask has shape {got.shape}; {table.where} has {n} slots")
        return got
    if got.ndim != 1 or (got.size and not np.issubdtype(got.dtype, np.integer)):
        raise ValueError(f"subset must be slot indices, a boolean mask or a predicate: {subset!r}")
    idx = got.astype(np.int64)
    bad = idx[(idx < 0) | (idx >= n)]
    if len(bad):
        raise ValueError(f"subset index {int(bad[0])} is outside the {n} slots of {table.where}")
    if len(np.unique(idx)) != len(idx):
        raise ValueError("subset names a slot twice; to serve a sample more often, use weights=")
    mask = np.zeros(n, bool)
    mask[idx] = True
    return mask


def _dealt(rule: Split, table: SampleTable, member: Mask) -> npt.NDArray[np.uint8]:
    keys = list(table.keys())
    if rule.group_by is not None and rule.group_by.startswith("column:"):
        raise ValueError(
            f"split group_by {rule.group_by!r}: a manifest column's groups are read when the "
            "split is recorded (precompute split STORE --group-column MANIFEST:COLUMN); "
            "serve it with split= alone"
        )
    groups = _groups(keys, member, rule.group_by) if rule.group_by is not None else None
    holds = table.class_counts(rule.stratify) if rule.stratify is not None else None
    return assign(rule, keys, member, holds, groups)


def _groups(keys: list[str], member: Mask, pattern: str) -> list[str]:
    """Each member's group (non-members get none: their keys need not match)."""
    found = key_groups([k for k, m in zip(keys, member, strict=True) if m], pattern)
    out = [""] * len(keys)
    for slot, group in zip(np.flatnonzero(member).tolist(), found, strict=True):
        out[slot] = group
    return out


def split_mask(choice: Choice, table: SampleTable) -> Mask:
    """The slots in part ``choice.split``: the store's recorded split, or ``choice.splits``.

    Raises:
        ValueError: No split recorded and none given, or no part of that name.
    """
    if choice.split is None:
        return np.ones(table.num_samples, bool)
    rule = choice.splits
    if isinstance(rule, Split):
        try:
            parts = _dealt(rule, table, table.valid)
        except SpecError as exc:
            raise ValueError(f"{table.where}: {exc}") from None
        names = rule.names
    else:
        recorded = table.recorded()
        if recorded is None:
            raise ValueError(
                f"{table.where} records no split: record one (precompute split STORE ...) or "
                "pass splits=Split({...})"
            )
        parts, names = recorded.parts, recorded.names
    if choice.split not in names:
        raise ValueError(f"no split {choice.split!r} in {table.where}; its splits: {list(names)}")
    mask: Mask = parts == names.index(choice.split)
    return mask


def _weights(choice: Choice, table: SampleTable, members: npt.NDArray[np.int64]) -> Any:
    if choice.weights is None:
        return (
            balanced_weights(table.class_counts(choice.balance), members)
            if (choice.balance is not None)
            else None
        )
    w = np.asarray(choice.weights, np.float64)
    if w.shape != (table.num_samples,):
        raise ValueError(
            f"weights has shape {w.shape}: one per slot of {table.where}, ({table.num_samples},)"
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and >= 0")
    return w[members]


def resolve_pool(choice: Choice, table: SampleTable) -> Pool:
    """The :class:`Pool` of ``choice`` in ``table`` (module docstring).

    Raises:
        ValueError: Nothing selected, no weight above 0, more draws without replacement than
            samples with a weight, or a refusal of the subset, split or balance (named).
    """
    member = table.valid & subset_mask(choice.subset, table) & split_mask(choice, table)
    members = np.flatnonzero(member).astype(np.int64)
    if not len(members):
        raise ValueError(f"the subset and split select no stored sample of {table.where}")
    plain = choice.subset is None and choice.split is None and not choice.weighted
    if choice.repeat_factor is not None:
        counts = table.class_counts(str(choice.balance))  # Choice: repeat_factor needs balance
        factors = repeat_factors(counts, members, choice.repeat_factor)
        return Pool(members, repeats=factors)
    if not choice.weighted:
        return Pool(members, plain=plain and choice.balance is None)
    weights = _weights(choice, table, members)
    drawable = len(members) if weights is None else int((weights > 0).sum())
    if not drawable:
        raise ValueError(f"no selected sample of {table.where} has a weight above 0")
    draws = choice.samples_per_epoch or len(members)
    if not choice.replacement and draws > drawable:
        raise ValueError(
            f"samples_per_epoch {draws} without replacement: only {drawable} selected samples "
            f"of {table.where} have a weight above 0"
        )
    return Pool(members, weights, None, choice.replacement, draws)
