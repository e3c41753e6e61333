"""Class names of label fields in a manifest: all integers, or all names mapped to indices.

The rule of :mod:`precompute.sources.manifests`, per field: a label field's values are either all
integers (kept as given, no class list) or all class names (sorted; a label becomes the index
of its name). A field that mixes the two is refused naming the first line that differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from precompute.errors import SourceError
from precompute.fields.spec import FieldSpec
from precompute.policy import show

__all__ = ["name_classes"]


def _labels(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _place(where: int | str) -> str:
    """A row's place in messages: a manifest's line number, or a locator (``FILE#ROW``)."""
    return f"line {where}" if isinstance(where, int) else where


def _one_kind(src: str, field: str, rows: Sequence[tuple[int | str, dict[str, Any]]]) -> bool:
    """Whether the field's labels are names; a mix is a :class:`SourceError`."""
    first: tuple[int | str, Any] | None = None
    for n, cells in rows:
        for label in _labels(cells[field]):
            if first is None:
                first = (n, label)
            elif isinstance(label, str) != isinstance(first[1], str):
                raise SourceError(
                    f"{src}: {_place(n)}: {field} {show(label)} and {_place(first[0])}'s "
                    f"{show(first[1])} mix integers and class names; use one or the other"
                )
    return first is not None and isinstance(first[1], str)


def name_classes(
    src: str, fields: Sequence[FieldSpec], rows: Sequence[tuple[int | str, dict[str, Any]]]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Replace class names by indices in ``rows`` (in place); return each field's names.

    Args:
        src: The manifest, for messages.
        fields: The manifest's fields; those whose kind takes ``class_names`` are mapped.
        rows: ``(where, cells)`` with parsed cells (``where``: a manifest's line number, or a
            row's locator such as ``FILE#ROW``); a named field's cells are rewritten.

    Returns:
        ``(field, sorted class names)`` of each field given by name.
    """
    out = []
    for f in fields:
        if not f.spec.class_names or not _one_kind(src, f.name, rows):
            continue
        names = tuple(sorted({str(v) for _, cells in rows for v in _labels(cells[f.name])}))
        index = {name: i for i, name in enumerate(names)}
        for _, cells in rows:
            value = cells[f.name]
            cells[f.name] = (
                tuple(index[v] for v in value) if isinstance(value, tuple) else index[value]
            )
        out.append((f.name, names))
    return tuple(out)
