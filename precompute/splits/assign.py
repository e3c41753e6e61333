"""Named splits of a store's samples as a pure function of the rule, the keys and the seed.

A :class:`Split` names its parts and their fractions (``{"train": 0.8, "val": 0.2}``), a seed,
optionally the field whose classes each part keeps in proportion (``stratify``) and a grouping
(``group_by``) that puts every sample of a group on one side (one patient, one scene). The
units dealt out are the samples, or the groups: sorted by their key (a sample's source key, a
group's name) and permuted by the seed, then cut at the cumulative fractions of the samples
they hold, within each stratum when stratified. So the split depends on the keys, the seed,
the rule and (stratified) the classes alone: not on the store's slot order or its build seed,
and two stores of the same keys split alike.

**Strata.** A unit's stratum is the **rarest class it holds at all** (rarest: held by the
fewest units), as iterative stratification for multi-label data deals the rarest label first
(Sechidis et al., 2011). A sample of a label field is its own unit holding one class, so its
stratum is its label; a patient whose slices' masks hold a rare lesion class anywhere is in
that class's stratum, so each part gets its share of the patients with a lesion. The class a
unit holds most of would be background for every patient of a segmentation set: one stratum,
nothing kept in proportion. Where every unit holds the same classes there is still one
stratum: :func:`assign` warns (:class:`~precompute.errors.SplitWarning`) and
:func:`count_strata` says so for the record.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from precompute.errors import SpecError, SplitWarning
from precompute.fields.base import ClassCounts

__all__ = ["NONE", "Split", "assign", "count_strata", "key_groups"]

NONE = 255  # the assignment of a slot in no part (a hole, a row without a split)
_TAG = 0x5B11
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _fractions(given: Mapping[str, Any]) -> Mapping[str, float]:
    if not isinstance(given, Mapping) or not given:
        raise SpecError(f"split fractions must be a mapping of name -> fraction, got {given!r}")
    out: dict[str, float] = {}
    for name, value in given.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SpecError(
                f"split name {name!r} must match [a-z][a-z0-9_]* (at most 32 characters)"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise SpecError(f"split fraction of {name!r} must be in (0, 1], got {value!r}")
        out[name] = float(value)
    if abs(sum(out.values()) - 1) > 1e-6 or len(out) >= NONE:
        raise SpecError(f"split fractions must sum to 1, got {out} (sum {sum(out.values()):g})")
    return MappingProxyType(out)


@dataclass(frozen=True)
class Split:
    r"""A rule that deals a store's samples into named parts.

    Args:
        fractions: Part name -> fraction of the samples, summing to 1.
        seed: Seed of the permutation of the units.
        stratify: A field with classes (``label``, a ``mask``) whose classes every part
            keeps in proportion (each unit's stratum: the rarest class it holds); None: not
            stratified.
        group_by: Samples of one group land in one part. A regular expression over the
            source key (the group is its first capture group, else the whole match: e.g.
            ``^(patient\d+)/``), or ``"column:NAME"``, a manifest column given with the
            groups at record time (:func:`precompute.splits.manifest.manifest_column`); None:
            every sample is its own unit.

    Raises:
        SpecError: Bad names, fractions, seed or pattern.
    """

    fractions: Mapping[str, float]
    seed: int = 0
    stratify: str | None = None
    group_by: str | None = None
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fractions", _fractions(self.fractions))
        object.__setattr__(self, "names", tuple(self.fractions))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SpecError(f"split seed must be an integer >= 0, got {self.seed!r}")
        if self.group_by is not None and not self.group_by.startswith("column:"):
            try:
                re.compile(self.group_by)
            except re.error as exc:
                raise SpecError(f"split group_by {self.group_by!r} is no pattern: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {
            "fractions": dict(self.fractions),
            "seed": self.seed,
            "stratify": self.stratify,
            "group_by": self.group_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Split:
        """Parse :meth:`to_dict`'s dict."""
        return cls(
            dict(data["fractions"]), int(data.get("seed", 0)), data.get("stratify"),
            data.get("group_by"),
        )  # fmt: skip


def key_groups(keys: Sequence[str], pattern: str) -> list[str]:
    """Each key's group under ``pattern`` (its first capture group, else the whole match).

    Raises:
        SpecError: Naming up to three keys the pattern does not match.
    """
    regex = re.compile(pattern)
    out, missed = [], []
    for key in keys:
        found = regex.search(key)
        if found is None:
            missed.append(key)
            out.append("")
            continue
        out.append(found.group(1) if regex.groups else found.group(0))
    if missed:
        raise SpecError(
            f"split group_by {pattern!r} matches no group in {len(missed)} key(s), e.g. "
            f"{missed[:3]}: every sample needs a group"
        )
    return out


def _cut(sizes: npt.NDArray[np.int64], fractions: Sequence[float]) -> npt.NDArray[np.int64]:
    """The part of each unit (in dealing order) whose samples fill the cumulative fractions."""
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    bounds = np.rint(np.cumsum(fractions)[:-1] * total)
    middles = ends - sizes / 2  # a unit goes where most of its samples fall
    return np.searchsorted(bounds, middles, side="right").astype(np.int64)


def _units(
    keys: Sequence[str], member: npt.NDArray[np.bool_], groups: Sequence[str] | None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any], npt.NDArray[np.int64]]:
    """The member slots, the units' sorted names and each member slot's unit."""
    units = np.asarray(groups if groups is not None else keys, dtype=object)
    slots = np.flatnonzero(member)
    names, unit_of = np.unique(units[slots].astype(str), return_inverse=True)
    return slots, names, unit_of.astype(np.int64)


def _strata(
    num_slots: int,
    slots: npt.NDArray[np.int64],
    unit_of: npt.NDArray[np.int64],
    num_units: int,
    holds: ClassCounts,
) -> npt.NDArray[np.int64]:
    """Each unit's stratum: the rarest class it holds (the fewest units hold it); -1: none.

    Ties go to the lower class index.
    """
    unit_at = np.full(num_slots, -1, np.int64)
    unit_at[slots] = unit_of
    samples, classes = np.asarray(holds.samples, np.int64), np.asarray(holds.classes, np.int64)
    units = unit_at[samples]
    keep = (units >= 0) & (classes >= 0) & (np.asarray(holds.counts) > 0)
    out = np.full(num_units, -1, np.int64)
    if not keep.any():
        return out
    pairs = np.unique(np.stack([units[keep], classes[keep]], 1), axis=0)  # (unit, class) once
    held_by = np.bincount(pairs[:, 1])  # units holding each class
    order = np.lexsort((pairs[:, 1], held_by[pairs[:, 1]], pairs[:, 0]))
    ranked = pairs[order]  # by unit, then rarest class first
    first = np.unique(ranked[:, 0], return_index=True)[1]
    out[ranked[first, 0]] = ranked[first, 1]
    return out


def count_strata(
    keys: Sequence[str],
    member: npt.NDArray[np.bool_],
    holds: ClassCounts,
    groups: Sequence[str] | None = None,
) -> int:
    """How many strata the units of a stratified split fall into (1: stratifying does nothing)."""
    slots, names, unit_of = _units(keys, member, groups)
    return len(np.unique(_strata(len(keys), slots, unit_of, len(names), holds)))


def assign(
    rule: Split,
    keys: Sequence[str],
    member: npt.NDArray[np.bool_],
    holds: ClassCounts | None = None,
    groups: Sequence[str] | None = None,
) -> npt.NDArray[np.uint8]:
    """Return each slot's part (an index into ``rule.names``; :data:`NONE` off ``member``).

    Args:
        rule: The split.
        keys: Every slot's source key.
        member: The slots to deal (valid samples); the others get :data:`NONE`.
        holds: The classes each slot holds in field ``rule.stratify`` (its kind's class
            counts, slots as samples), when stratified: each unit's stratum is the rarest
            class it holds.
        groups: Every slot's group when ``rule.group_by`` (else each key is its own).

    Warns:
        SplitWarning: Stratified, but every unit falls into one stratum (every group holds
            the same classes): the parts keep no class in proportion but by chance.
    """
    n = len(keys)
    slots, names, unit_of = _units(keys, member, groups)
    stratum = np.zeros(len(names), np.int64)
    if holds is not None and len(slots):
        stratum = _strata(n, slots, unit_of, len(names), holds)
        if len(names) > 1 and len(np.unique(stratum)) == 1:
            warnings.warn(_one_stratum(rule, holds, member), SplitWarning, stacklevel=2)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([rule.seed, _TAG])))
    dealt = rng.permutation(len(names))  # names are sorted: the permutation is the keys'
    sizes = np.bincount(unit_of, minlength=len(names)).astype(np.int64)
    part_of_unit = np.zeros(len(names), np.int64)
    fractions = list(rule.fractions.values())
    for s in np.unique(stratum):
        order = dealt[stratum[dealt] == s]
        part_of_unit[order] = _cut(sizes[order], fractions)
    out = np.full(n, NONE, np.uint8)
    out[slots] = part_of_unit[unit_of]
    return out


def _one_stratum(rule: Split, holds: ClassCounts, member: npt.NDArray[np.bool_]) -> str:
    """The warning of a stratified split whose units all hold the same classes."""
    samples = np.asarray(holds.samples, np.int64)
    mine = member[samples] & (np.asarray(holds.counts) > 0)
    held = np.unique(np.asarray(holds.classes)[mine]).tolist()
    unit = "group" if rule.group_by is not None else "sample"
    same = f"the same classes ({', '.join(map(str, held))})" if held else "no class"
    return (
        f"split stratified by {rule.stratify!r}: every {unit} holds {same}, so all fall into "
        f"one stratum and no class is kept in proportion but by chance; the split is dealt as "
        f"without stratify"
    )
