"""The ``label`` kind: one int64 class index per sample (``-1`` marks a hole, as in format v1).

Written inline (an integer, or a class name: names are sorted, a label is its name's index),
never moved by geometry; mixup and CutMix turn it into one-hot soft targets mixed by the
batch's lambda (CutMix: the pasted area). Its class count is learned from the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size
from precompute.fields import values
from precompute.fields.base import ClassCounts, Kind, Storage
from precompute.fields.options import ColumnClaim, Option, SuffixClaim, integer, optional
from precompute.fields.registry import has_kind, register_kind
from precompute.sources.manifests import MAX_LABEL

__all__ = ["LabelKind"]


def _check_classes(where: str, value: Any) -> int:
    """A class count in ``[1, MAX_LABEL + 1]``: every label a manifest may give."""
    return int(integer(1, MAX_LABEL + 1)(where, value))


class LabelKind(Kind):
    """One int64 class index per sample (``-1`` marks a hole, as in format v1)."""

    name = "label"
    source = "inline"
    mixup, cutmix = "blend", "area"
    class_names = True
    class_index = True
    # as many classes as a manifest's labels allow (MAX_LABEL + 1): a landmark or species set
    # has hundreds of thousands; a point or mask class count stays check_count's
    options = MappingProxyType({"classes": Option(None, optional(_check_classes))})
    columns = ColumnClaim(("integer", "string"), ("label",), class_label=True, priority=30)
    suffixes = SuffixClaim(("cls", "json:label", "txt"), integers=("txt",), priority=30)

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``()`` int64, holes ``-1``."""
        return Storage((), "int64", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An integer in ``[0, classes)`` (``[0, MAX_LABEL]`` without ``classes``)."""
        top = opts["classes"] if opts["classes"] is not None else MAX_LABEL + 1
        return np.asarray(values.class_index(value, top), dtype=np.int64)

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``classes``: the largest label + 1 (names are indices by now)."""
        return {"classes": max(found) + 1} if opts["classes"] is None and found else {}

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Every label is a class index."""
        top = opts["classes"] if opts["classes"] is not None else MAX_LABEL + 1
        bad = stored[(stored < 0) | (stored >= top)]
        if bad.size:
            raise ValueError(f"label {int(bad[0])} is outside the classes 0..{top - 1}")

    def class_counts(self, stored: np.ndarray, opts: Mapping[str, Any]) -> ClassCounts:
        """One count of its class per sample (holes, ``-1``, none)."""
        stored = np.asarray(stored).reshape(-1)
        samples = np.flatnonzero(stored >= 0)
        top = opts["classes"] or int(stored.max(initial=-1)) + 1
        ones = np.ones(len(samples), np.int64)
        return ClassCounts(samples, stored[samples].astype(np.int64), ones, max(top, 1))

    def parse_inline(self, raw: Any) -> Any:
        """An integer (a JSON integer or digits, at most ``MAX_LABEL``) or a class name."""
        value = values.parse_label(raw)
        if isinstance(value, int) and value > MAX_LABEL:
            raise ValueError(f"label {value} is larger than MAX_LABEL {MAX_LABEL}")
        return value


if not has_kind("label"):
    register_kind(LabelKind())
