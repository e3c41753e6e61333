"""``precompute split``: deal a complete store into named parts and record them with it.

Reads the store's keys, valid mask and (for ``--stratify``) the classes each sample holds,
deals the valid samples by the rule (:func:`precompute.splits.assign.assign`) and writes the
record (:func:`precompute.splits.record.write_splits`), with the number of strata a stratified
rule found (``strata``; 1: stratifying did nothing, and ``assign`` warned); the store's data is
never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.fields.base import ClassCounts
from precompute.format.classcounts import read_class_counts
from precompute.format.layout import StoreInfo, open_store_info
from precompute.sources.inputs import read_input
from precompute.sources.manifests import MAX_MANIFEST_BYTES
from precompute.splits.assign import Split, assign, count_strata, key_groups
from precompute.splits.manifest import column_by_key, manifest_rows
from precompute.splits.record import RecordedSplits, write_splits
from precompute.storage.location import Location, open_array

__all__ = ["parse_fractions", "record_split"]


def parse_fractions(text: str) -> dict[str, float]:
    """``train=0.8,val=0.2`` as a mapping.

    Raises:
        SpecError: A part without ``=`` or a fraction that is not a number.
    """
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            eq = ""
        if not eq:
            raise SpecError(f"split fractions: {part!r} is not NAME=FRACTION (e.g. train=0.8)")
    return out


def _field(info: StoreInfo, name: str) -> FieldSpec:
    for f in info.fields:
        if f.name == name:
            return f
    raise SpecError(f"{info.path}: no field {name!r} to stratify by; fields: "
                    f"{[f.name for f in info.fields]}")  # fmt: skip


def _holds(info: StoreInfo, name: str) -> ClassCounts:
    """The classes each slot holds in field ``name`` (its kind's counts, slots as samples)."""
    f, n = _field(info, name), info.layout.num_samples
    counts = (
        read_class_counts(info.path, name, n, f.options.get("classes"))
        if f.spec.stores_class_counts
        else f.spec.class_counts(open_array(info.path / name)[:], f.options)
    )
    if counts is None:
        raise SpecError(f"{info.path}: field {name!r} ({f.kind}) has no classes to stratify by")
    return counts


def _valid(info: StoreInfo) -> npt.NDArray[np.bool_]:
    if info.layout.version == 1:
        valid: npt.NDArray[np.bool_] = np.asarray(open_array(info.path / "label")[:]) >= 0
    else:
        valid = np.asarray(open_array(info.path / "valid")[:]) == 1
    return valid


def _column_groups(src: str, keys: list[str]) -> list[str]:
    manifest, _, column = src.rpartition(":")
    if not manifest or not column:
        raise SpecError(f"--group-column {src!r}: give MANIFEST:COLUMN")
    text = read_input(manifest, MAX_MANIFEST_BYTES).decode("utf-8-sig")
    return column_by_key(manifest, manifest_rows(manifest, text), column, keys)


def record_split(
    store: str | Path | Location, rule: Split, group_column: str | None = None
) -> RecordedSplits:
    """Deal the complete ``store`` by ``rule`` and record the parts with it; return them.

    Args:
        store: The store.
        rule: The split; its ``group_by`` is a key pattern, or ``column:NAME`` with
            ``group_column`` the manifest that holds the column (``MANIFEST:NAME``).
        group_column: ``MANIFEST:COLUMN`` whose cells are the groups.

    Raises:
        SpecError: A bad rule, a key the pattern does not match, no such field or column.
        StoreError: Not a complete store.
    """
    info = open_store_info(store)
    keys = [str(k) for k in open_array(info.path / "key")[:].tolist()]
    valid = _valid(info)
    groups = None
    if group_column is not None:
        groups = _column_groups(group_column, keys)
        lost = [k for k, g, v in zip(keys, groups, valid, strict=True) if v and not g]
        if lost:
            raise SpecError(f"{group_column}: no group for {len(lost)} sample(s), e.g. {lost[:3]}")
    elif rule.group_by is not None:
        found = key_groups([k for k, v in zip(keys, valid, strict=True) if v], rule.group_by)
        groups = [""] * len(keys)
        for slot, group in zip(np.flatnonzero(valid).tolist(), found, strict=True):
            groups[slot] = group
    holds = _holds(info, rule.stratify) if rule.stratify is not None else None
    parts = assign(rule, keys, valid, holds, groups)
    doc: dict[str, Any] = rule.to_dict()
    if group_column is not None:
        doc["group_by"] = f"column:{group_column}"
    if holds is not None:  # 1: every unit in one stratum, nothing kept in proportion
        doc["strata"] = count_strata(keys, valid, holds, groups)
    recorded = RecordedSplits(rule.names, parts, doc)
    write_splits(info.path, recorded)
    return recorded
