"""A manifest's extra columns by sample: the ``split`` column a build records, a group column.

A manifest (CSV with a header row, or JSONL) may carry columns the build does not store as
fields: ``split`` (each row's part: ``train``, ``val``, ...; empty for none) is honoured at build
time (:func:`source_splits`: recorded with the store, part of the source fingerprint), and any
column can name the groups of a grouped split (:func:`column_by_key`). Rows are matched to
samples by key: the column whose values (paths, normalised) are the samples' keys.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.errors import SourceError
from precompute.sources.manifests import jsonl_objects
from precompute.splits.assign import _NAME, NONE

__all__ = ["SPLIT_COLUMN", "column_by_key", "fold_splits", "manifest_rows", "source_splits"]

SPLIT_COLUMN = "split"


def manifest_rows(src: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line, {column: cell})`` of a manifest: a CSV's header row names the columns."""
    if src.lower().endswith(".csv"):
        reader = csv.reader(io.StringIO(text))
        try:
            rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
        except csv.Error as exc:
            raise SourceError(f"{src}: not CSV ({exc})") from exc
        if not rows:
            return []
        head = [c.strip() for c in rows[0][1]]
        return [(n, dict(zip(head, (c.strip() for c in r), strict=False))) for n, r in rows[1:]]
    return jsonl_objects(src, text)


def _norm(path: Any) -> str:
    return posixpath.normpath(str(path).replace("\\", "/")) if path not in (None, "") else ""


def column_by_key(
    src: str, rows: Sequence[tuple[int, Mapping[str, Any]]], column: str, keys: Sequence[str]
) -> list[str]:
    """Column ``column``'s cell of each of ``keys`` (``""`` where no row or an empty cell).

    The rows are matched by the column whose normalised values cover the most keys.

    Raises:
        SourceError: No row has ``column``, or no column holds the keys.
    """
    if not any(column in row for _, row in rows):
        raise SourceError(
            f"{src}: no column {column!r} (columns: {sorted(rows[0][1]) if rows else []})"
        )
    wanted = {_norm(k) for k in keys if k}
    names = {name for _, row in rows for name in row if name != column}
    hits = {n: sum(_norm(row.get(n)) in wanted for _, row in rows) for n in sorted(names)}
    best = max(hits, key=lambda n: hits[n], default=None)
    if best is None or not hits[best]:
        raise SourceError(f"{src}: no column holds the store's keys (e.g. {sorted(wanted)[:2]})")
    cell = {_norm(row.get(best)): str(row.get(column) or "").strip() for _, row in rows}
    return [cell.get(_norm(k), "") for k in keys]


def source_splits(src: str, text: str, keys: Sequence[str]) -> tuple[str, ...]:
    """Each key's ``split`` cell, or ``()`` for a manifest without that column.

    Raises:
        SourceError: A part name that is not ``[a-z][a-z0-9_]*``, naming its line; too many
            parts (254 at most).
    """
    rows = manifest_rows(src, text)
    if not any(SPLIT_COLUMN in row for _, row in rows):
        return ()
    for n, row in rows:
        value = str(row.get(SPLIT_COLUMN) or "").strip()
        if value and not _NAME.fullmatch(value):
            raise SourceError(
                f"{src}: line {n}: split {value[:40]!r} is not a part name ([a-z][a-z0-9_]*)"
            )
    out = tuple(column_by_key(src, rows, SPLIT_COLUMN, keys))
    if len(set(out) - {""}) >= NONE:
        raise SourceError(f"{src}: the split column names {len(set(out))} parts; at most 254")
    return out


def fold_splits(fingerprint: str, splits: Sequence[str]) -> str:
    """``fingerprint``, with a manifest's split column folded in when it has one.

    Without a split column the fingerprint is unchanged, so every store and cache key made
    before splits were honoured keeps its identity; with one, a change of split is a new
    source (the cache builds a store with its own recorded split).
    """
    if not splits:
        return fingerprint
    h = hashlib.sha256(b"nostall.splits.v1\0" + fingerprint.encode())
    h.update(json.dumps(list(splits)).encode())
    return h.hexdigest()
