r"""Rows of a manifest with one column (CSV) or key (JSONL) per field, read safely.

The reading and line rules of :mod:`precompute.sources.manifests` (``docs/manifests.md``): at most
``MAX_MANIFEST_BYTES``, UTF-8 with an optional BOM, blank lines ignored, JSONL lines ending at
``\n`` only; a CSV manifest of fields needs its header row. Errors name the file and line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from precompute.errors import SourceError
from precompute.sources.manifests import jsonl_objects as jsonl_rows
from precompute.sources.manifests import read_manifest_text as read_text

__all__ = ["csv_rows", "jsonl_rows", "read_text"]


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
