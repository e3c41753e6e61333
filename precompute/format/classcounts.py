"""Class counts a build stores for fields read chunk by chunk: ``_nostall/class_counts/FIELD.npy``.

A kind that sets ``stores_class_counts`` (a mask: its pixels per class) has its stored values
counted by the shard task (:func:`shard_class_counts`, ``Kind.class_counts``), which writes
the triplets in its marker (``stats.class_counts.FIELD``); :func:`write_class_counts` folds the
markers in shard order when the store is published, before the completion marker, into one
``.npy`` file per field: an ``(M, 3)`` int64 array of ``(slot, class, count)`` rows (a slot's
classes it holds none of are absent). Loaders read it to balance sampling
(:func:`read_class_counts`); a store built before it has no file, and a loader says so.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from precompute.errors import StoreError, StoreMetadataError
from precompute.fields import ClassCounts, FieldSpec
from precompute.format.layout import MARKER_DIR
from precompute.storage.location import Location, location

__all__ = [
    "count_lines",
    "count_summary",
    "read_class_counts",
    "shard_class_counts",
    "write_class_counts",
]

_FOLDER = "class_counts"


def _counted(fields: Iterable[FieldSpec]) -> list[FieldSpec]:
    return [f for f in fields if f.spec.stores_class_counts]


def shard_class_counts(
    fields: Iterable[FieldSpec], arrays: Mapping[str, Any]
) -> dict[str, list[list[int]]]:
    """``{FIELD: [[sample, class, count], ...]}`` of one shard (samples from the shard's start)."""
    out: dict[str, list[list[int]]] = {}
    valid = arrays.get("valid")
    for f in _counted(fields):
        counts = f.spec.class_counts(np.asarray(arrays[f.name]), f.options)
        if counts is None:
            continue
        keep = (
            np.ones(len(counts.samples), bool)
            if valid is None
            else np.asarray(valid, bool)[counts.samples]
        )
        rows = np.stack([counts.samples, counts.classes, counts.counts], 1)[keep]
        out[f.name] = rows.astype(np.int64).tolist()
    return out


def _path(root: str | Path | Location, name: str) -> Location:
    return location(root) / MARKER_DIR / _FOLDER / f"{name}.npy"


def write_class_counts(
    root: str | Path | Location,
    fields: Iterable[FieldSpec],
    markers: Sequence[Mapping[str, Any]],
) -> list[str]:
    """Fold the markers' counts into one file per counted field; return the fields written.

    A field whose counts some marker lacks (a shard written before counts were kept, by a
    resumed build) gets no file.
    """
    written = []
    for f in _counted(fields):
        parts = [m.get("stats", {}).get("class_counts", {}).get(f.name) for m in markers]
        if any(p is None for p in parts):
            continue
        rows = [
            np.asarray(p, np.int64).reshape(-1, 3) + np.array([m["start"], 0, 0], np.int64)
            for p, m in zip(parts, markers, strict=True)
        ]
        table = np.concatenate(rows) if rows else np.zeros((0, 3), np.int64)
        buf = io.BytesIO()
        np.save(buf, table, allow_pickle=False)
        _path(root, f.name).write_bytes(buf.getvalue())
        written.append(f.name)
    return written


def read_class_counts(
    root: str | Path | Location, name: str, num_samples: int, num_classes: int | None
) -> ClassCounts | None:
    """The stored class counts of field ``name``, or None (the store has none).

    ``num_classes``: the field's class count (None: the largest class stored + 1).

    Raises:
        StoreMetadataError: The file is damaged or names slots or classes out of range.
    """
    path = _path(root, name)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, StoreError):
        return None
    try:
        table = np.load(io.BytesIO(data), allow_pickle=False)
        if table.ndim != 2 or table.shape[1] != 3 or table.dtype != np.int64:
            raise ValueError(f"an array of {table.shape} {table.dtype}, want (M, 3) int64")
        slot, cls, count = table.T
        if num_classes is None:
            num_classes = int(cls.max(initial=-1)) + 1
        if len(table) and (
            slot.min() < 0 or slot.max() >= num_samples or cls.min() < 0
            or cls.max() >= num_classes or count.min() < 0
        ):  # fmt: skip
            raise ValueError("a slot, class or count out of range")
    except (ValueError, OSError) as exc:
        raise StoreMetadataError(f"{path}: not a readable class count table: {exc}") from None
    return ClassCounts(slot.copy(), cls.copy(), count.copy(), num_classes)


def count_summary(
    root: str | Path | Location, fields: Iterable[FieldSpec], n: int
) -> dict[str, dict[str, Any] | None]:
    """Per counted field, its stored counts summed by class (``inspect --json``).

    ``{"counts": [...], "share": [...], "samples": [...]}``: per class, its count (pixels of a
    mask), its share of them and how many samples hold it; None: none stored (a store built
    before counts were, or not complete); ``{"error": ...}``: the file is damaged.
    """
    out: dict[str, dict[str, Any] | None] = {}
    for f in _counted(fields):
        try:
            counts = read_class_counts(root, f.name, n, f.options.get("classes"))
        except StoreMetadataError as exc:
            out[f.name] = {"error": str(exc)}
            continue
        if counts is None:
            out[f.name] = None
            continue
        total = np.bincount(counts.classes, counts.counts, counts.num_classes).astype(np.int64)
        holding = np.bincount(counts.classes, minlength=counts.num_classes)
        share = total / max(int(total.sum()), 1)
        out[f.name] = {
            "counts": total.tolist(),
            "share": share.tolist(),
            "samples": holding.tolist(),
        }
    return out


def count_lines(
    root: str | Path | Location, fields: Iterable[FieldSpec], n: int, incomplete: bool = False
) -> list[str]:
    """``precompute inspect``'s lines of the stored class counts.

    Per class: its share of the counts and how many samples hold it (a rare class shows here).
    ``incomplete``: the store is not complete, and its counts are written when it is.
    """
    if incomplete:
        return [f"counts     {f.name}: counted when the build completes" for f in _counted(fields)]
    lines = []
    for name, summary in count_summary(root, fields, n).items():
        if summary is None:
            lines.append(f"counts     {name}: none stored (built before class counts were)")
        elif "error" in summary:
            lines.append(f"counts     {name}: {summary['error']}")
        else:
            shown = ", ".join(
                f"{c}: {share:.2%} in {held}"
                for c, (share, held) in enumerate(
                    zip(summary["share"], summary["samples"], strict=True)
                )
                if c < 12
            )
            lines.append(f"counts     {name} per class (share, samples holding it): {shown}")
    return lines
