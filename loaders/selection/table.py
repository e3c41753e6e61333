"""What the selection layer asks of one store: slots, chunks, validity, fields, keys, splits.

A loader describes each store it serves as a :class:`SampleTable` (``StoreLoader`` from its
opened store, ``JpegLoader`` from its listed files); the selection is resolved against it
(:mod:`loaders.selection.resolve`) and never reads a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from precompute.fields import ClassCounts, FieldSpec, Kind
from precompute.splits import RecordedSplits

__all__ = ["SampleTable", "SamplesView"]


def _none_counts(name: str, classes: int | None) -> ClassCounts | None:
    return None


@dataclass(frozen=True, eq=False)
class SampleTable:
    """One store as the selection layer sees it.

    Attributes:
        where: The store (its path), named in errors.
        num_samples: Sample slots N (holes included).
        chunk_samples: Samples per inner chunk.
        valid: Mask of the stored samples (holes left out).
        fields: The store's fields.
        arrays: Per-sample arrays read whole (labels, companions), by name.
        keys: Every slot's source key (read when asked).
        stored_counts: The class counts the build stored of a field (a mask's), or None.
        recorded: The split recorded with the store, or None.
    """

    where: str
    num_samples: int
    chunk_samples: int
    valid: npt.NDArray[np.bool_]
    fields: tuple[FieldSpec, ...] = ()
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    keys: Callable[[], Sequence[str]] = lambda: ()
    stored_counts: Callable[[str, int | None], ClassCounts | None] = _none_counts
    recorded: Callable[[], RecordedSplits | None] = lambda: None

    def field(self, name: str) -> FieldSpec:
        """The field ``name``.

        Raises:
            ValueError: The store has no such field (naming its fields).
        """
        for f in self.fields:
            if f.name == name:
                return f
        names = [f.name for f in self.fields]
        raise ValueError(f"{self.where} has no field {name!r}; its fields: {names}")

    def class_counts(self, name: str) -> ClassCounts:
        """How much of each class each slot holds in field ``name``, as its kind counts it.

        Read from the per-sample array, or from the counts the build stored for a field read
        chunk by chunk (a mask).

        Raises:
            ValueError: The field has no classes, or its counts were not stored (a store
                built before they were: rebuild it).
        """
        f = self.field(name)
        if type(f.spec).class_counts is Kind.class_counts:  # the kind counts no classes
            raise ValueError(
                f"{self.where}: field {name!r} ({f.kind}) has no classes to balance; fields: "
                f"{[g.name for g in self.fields]}"
            )
        if f.name in self.arrays:
            counts = f.spec.class_counts(self.arrays[f.name], f.options)
        else:
            counts = self.stored_counts(f.name, f.options.get("classes"))
        if counts is None:
            why = (
                "the store was built before they were stored; rebuild it to balance by it"
                if f.spec.stores_class_counts
                else "its values are read chunk by chunk (large samples) and its kind stores "
                "no counts at build time"
            )
            raise ValueError(f"{self.where}: field {name!r} ({f.kind}) has no stored class "
                             f"counts: {why}")  # fmt: skip
        return counts


class SamplesView(Mapping[str, Any]):
    """What a ``subset`` predicate sees: the per-sample arrays, ``key``, ``index``, ``valid``.

    ``key`` (a numpy array of str) is read the first time it is asked for.
    """

    def __init__(self, table: SampleTable) -> None:
        self._table = table
        self._keys: np.ndarray | None = None

    def __getitem__(self, name: str) -> Any:
        if name == "key":
            if self._keys is None:
                self._keys = np.asarray(list(self._table.keys()), dtype=str)
            return self._keys
        if name == "index":
            return np.arange(self._table.num_samples, dtype=np.int64)
        if name == "valid":
            return self._table.valid
        return self._table.arrays[name]

    def __iter__(self) -> Any:
        return iter([*self._table.arrays, "key", "index", "valid"])

    def __len__(self) -> int:
        return len(self._table.arrays) + 3
