"""Named tables the fields' kinds point into: file decoders, build geometry rules, the kinds.

A kind names its decoder and its build rule (``Kind.decoder``, ``Kind.resample``); the
modules that own them keep a ``dict`` of name -> entry and use these two functions, so adding
an entry and looking one up for a field fail the same way in every table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from precompute.errors import SpecError

if TYPE_CHECKING:
    from precompute.fields.spec import FieldSpec

__all__ = ["add_entry", "entry_for"]

T = TypeVar("T")


def add_entry(table: dict[str, T], what: str, name: str, entry: T) -> T:
    """Add ``entry`` to ``table`` as ``name``; return it.

    Raises:
        SpecError: ``table`` holds ``name`` already (``what`` names the table's entries).
    """
    if name in table:
        raise SpecError(f"a {what} named {name!r} is registered already")
    table[name] = entry
    return entry


def entry_for(table: Mapping[str, T], name: str, field: FieldSpec, uses: str, lacks: str) -> T:
    """``table[name]``, the entry ``field``'s kind names.

    Raises:
        SpecError: ``fields.NAME: kind 'K' <uses> 'name', <lacks>; known: [...])``.
    """
    if name not in table:
        raise SpecError(
            f"fields.{field.name}: kind {field.kind!r} {uses} {name!r}, {lacks}; "
            f"known: {sorted(table)})"
        )
    return table[name]
