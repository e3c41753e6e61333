"""Named tables the fields' kinds point into: file decoders, build geometry rules, the kinds.

A kind names its decoder and its build rule (``Kind.decoder``, ``Kind.resample``); the
modules that own them keep a ``dict`` of name -> entry and use these two functions, so adding
an entry and looking one up for a field fail the same way in every table.

**Kinds from other modules and packages** (:func:`load_plugins`): a kind that lives outside
:mod:`precompute.fields.kinds` is a module that registers itself when imported
(``register_kind``, and its decoder and build rule). Such modules are named as entry points of
the group ``nostall.kinds`` (``name = "package.module"``), as the ``precompute`` command's
sub-commands are of ``nostall.commands``; the kinds this distribution ships are named in
:data:`BUILTIN` too, so a source tree on ``PYTHONPATH`` (not installed) has them. The registry
(:data:`precompute.fields.kinds.KINDS`) loads them all at its first look-up, so importing
:mod:`precompute.fields` imports no kind module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, TypeVar

from precompute.errors import SpecError

if TYPE_CHECKING:
    from precompute.fields.spec import FieldSpec

__all__ = ["BUILTIN", "GROUP", "add_entry", "entry_for", "load_plugins"]

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


GROUP = "nostall.kinds"
# The kind modules of this distribution (also its entry points: pyproject.toml)
BUILTIN = ("precompute.audio.kind",)
_loaded: list[bool] = []


def load_plugins() -> None:
    """Import every kind module (built in, then the entry points'), once per process.

    Raises:
        ImportError: A kind module named by an entry point cannot be imported (the message
            names the entry point).
    """
    if _loaded:
        return
    _loaded.append(True)  # before the imports: a kind module looks kinds up as it registers
    for module in BUILTIN:
        importlib.import_module(module)
    for ep in entry_points(group=GROUP):
        if ep.value in BUILTIN:
            continue
        try:
            ep.load()
        except ImportError as exc:
            raise ImportError(f"the kind plugin {ep.name} = {ep.value!r} ({GROUP}): {exc}") from exc
