r"""Rows of a manifest with one column (CSV) or key (JSONL) per field, read safely.

The reading and line rules of :mod:`precompute.manifests` (``docs/manifests.md``): at most
``MAX_MANIFEST_BYTES``, UTF-8 with an optional BOM, blank lines ignored, JSONL lines ending at
``\n`` only; a CSV manifest of fields needs its header row. Errors name the file and line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from precompute.errors import SourceError
from precompute.inputs import read_input
from precompute.manifests import MAX_MANIFEST_BYTES

__all__ = ["csv_rows", "jsonl_rows", "read_text"]


def read_text(src: str) -> str:
    """The text of manifest ``src``, read safely (at most ``MAX_MANIFEST_BYTES``), UTF-8."""
    try:
        data = read_input(src, MAX_MANIFEST_BYTES)
    except FileNotFoundError as exc:
        raise SourceError(f"{src}: manifest does not exist") from exc
    except OSError as exc:
        raise SourceError(f"{src}: cannot read manifest: {exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{src}: manifest is not UTF-8 text (byte {exc.start})") from exc


def csv_rows(src: str, text: str, names: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
    """``(line, {field: cell})`` of a CSV manifest whose header row names every field."""
    reader = csv.reader(io.StringIO(text))
    try:
        rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise SourceError(f"{src}: line {max(reader.line_num, 1)}: not CSV ({exc})") from exc
    head = [c.strip() for c in rows[0][1]] if rows else []
    absent = [n for n in names if n not in head]
    if absent:
        raise SourceError(f"{src}: the header row needs a column per field; missing {absent}")
    at = {n: head.index(n) for n in names}
    return [(n, {f: r[i].strip() for f, i in at.items() if i < len(r)}) for n, r in rows[1:]]


def jsonl_rows(src: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line, object)`` of a JSONL manifest: one JSON object per non-blank line."""
    out = []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SourceError(f"{src}: line {n} is not JSON ({type(exc).__name__})") from exc
        if not isinstance(doc, dict):
            raise SourceError(f"{src}: line {n} is not a JSON object")
        out.append((n, doc))
    return out
