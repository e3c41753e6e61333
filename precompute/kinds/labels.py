"""The ``labels`` kind: multi-label tags, a multi-hot ``(classes,)`` uint8 vector per sample.

Written inline (a JSON list of class indices or names), never moved by geometry; mixing
blends the vectors by the batch's lambda (CutMix: the pasted area). Its class count is
learned from the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size
from precompute.errors import SpecError
from precompute.fields import values
from precompute.fields.base import ClassCounts, Kind, Storage, class_counts_of
from precompute.fields.options import ColumnClaim, Option, SuffixClaim, check_count, optional
from precompute.fields.registry import has_kind, register_kind

__all__ = ["LabelsKind"]


class LabelsKind(Kind):
    """Multi-label tags: a multi-hot ``(classes,)`` uint8 vector from a list of indices."""

    name = "labels"
    source = "inline"
    mixup, cutmix = "blend", "area"
    class_names = True
    options = MappingProxyType({"classes": Option(None, optional(check_count))})
    columns = ColumnClaim(("list",), ("labels", "tags"), class_label=True, priority=40)
    suffixes = SuffixClaim(("json:labels",), priority=40)

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``(classes,)`` uint8, holes all zero."""
        if opts["classes"] is None:
            raise SpecError(
                "labels storage needs the class count: set option 'classes' "
                "(a build learns it from the source)"
            )
        return Storage((opts["classes"],), "uint8", 0)

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``classes``: the largest index + 1 (names are indices by now)."""
        top = max((max(v) for v in found if v), default=0) + 1
        return {"classes": top} if opts["classes"] is None and found else {}

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Multi-hot: every value 0 or 1."""
        if stored.size and int(stored.max()) > 1:
            raise ValueError(f"multi-hot value {int(stored.max())} is not 0 or 1")

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """A list of distinct class indices below ``classes`` -> multi-hot."""
        hot = np.zeros(opts["classes"], dtype=np.uint8)
        for index in values.index_list(value, opts["classes"]):
            hot[index] = 1
        return hot

    def class_counts(self, stored: np.ndarray, opts: Mapping[str, Any]) -> ClassCounts:
        """One count of each class a sample is tagged with."""
        return class_counts_of(np.asarray(stored).reshape(len(stored), -1))

    def parse_inline(self, raw: Any) -> Any:
        """A JSON list (or its text) of class indices or class names."""
        return values.parse_label_list(raw)


if not has_kind("labels"):
    register_kind(LabelsKind())
