"""Sources whose columns or folders name kinds: a manifest's field columns, the fields named.

A manifest of fields (``.csv``/``.jsonl``, no ``path`` column) names each field after its kind
(``image``, ``mask``, ``keypoints``, ``label``, ...: any registered kind) and holds at least one
file column (:func:`field_columns`). :func:`named_fields` makes the field of each such name,
with the field flags' options (by kind name), the spec's letterbox ``fill`` for a kind that
has that option, and the kind's ``hint`` in the message of an option it refuses. A source
reader whose fields are fixed names (a segmentation folder's ``image`` + ``mask``) uses it too.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.errors import SourceError, SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.sources.classes import MANIFEST_EXTENSIONS
from precompute.sources.rows import jsonl_rows, read_text

__all__ = ["field_columns", "named_fields"]


def _columns(src: str, text: str | None) -> list[str]:
    """The header row of a CSV manifest, or the keys of a JSONL manifest's first object."""
    text = read_text(src) if text is None else text
    if not src.lower().endswith(".csv"):
        docs = jsonl_rows(src, text)
        return [str(k) for k in docs[0][1]] if docs else []
    try:
        rows = (r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r))
        return [c.strip() for c in next(rows, [])]
    except csv.Error as exc:
        raise SourceError(f"{src}: not CSV ({exc})") from exc


def field_columns(src: str, text: str | None = None) -> list[str]:
    """The columns of a field manifest that name kinds; empty for anything else.

    ``text``: the manifest's text when the caller has read it already (read here if None).
    """
    if not src.lower().endswith(MANIFEST_EXTENSIONS):
        return []
    cols = _columns(src, text)
    named = [c for c in cols if c in KINDS]
    has_file = any(KINDS[c].source == "file" for c in named)
    return named if "path" not in cols and has_file else []


def _field(src: str, name: str, opts: Mapping[str, Any]) -> FieldSpec:
    try:
        return FieldSpec(name, name, opts)
    except SpecError as exc:
        raise SpecError(f"{src}: {exc} ({KINDS[name].hint})") from None


def named_fields(
    src: str,
    names: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    fill: int,
    what: str | None = None,
) -> tuple[FieldSpec, ...]:
    """One field per name in ``names``, of the kind of that name, with ``options[name]``.

    Args:
        src: The source (named in errors).
        names: Field names that are kind names.
        options: Options by kind name (the field flags).
        fill: The spec's letterbox fill, given to a kind with a ``fill`` option.
        what: How a refused option's message names the source (default ``src``).

    Raises:
        SpecError: Options for a field the source does not have, or a field's options
            refused (with its kind's ``hint``).
    """
    unused = sorted(set(options) - set(names))
    if unused:
        raise SpecError(f"{src}: options for field(s) {unused} the source does not have")
    base = {name: dict(options.get(name, {})) for name in names}
    for name, opts in base.items():
        if "fill" in KINDS[name].options:  # the image's letterbox fill: the spec's
            opts.setdefault("fill", fill)
    return tuple(_field(what or src, name, opts) for name, opts in base.items())
