"""The registry of kinds, and the named tables the kinds point into (file decoders, rules).

A kind names its decoder and its build rule (``Kind.decoder``, ``Kind.resample``); the
modules that own them keep a ``dict`` of name -> entry and use these two functions, so adding
an entry and looking one up for a field fail the same way in every table.

**Kinds are modules** (:func:`load_plugins`, ``docs/kinds.md``): each kind is a module that
registers itself when imported (:func:`register_kind`, and its decoder, rules, source reader:
:mod:`precompute.kinds.hooks`). Such modules are named as entry points of the group
``nostall.kinds`` (``name = "package.module"``), as the ``precompute`` command's sub-commands
are of ``nostall.commands``; the kinds this distribution ships (``precompute/kinds/``) are
named in :data:`BUILTIN` too, so a source tree on ``PYTHONPATH`` (not installed) has them. The
registry (:data:`KINDS`, also ``precompute.fields.KINDS``) loads them all at its first
look-up, so importing :mod:`precompute.fields` imports no kind module.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, TypeVar

from precompute.errors import SpecError
from precompute.fields.base import Kind

if TYPE_CHECKING:
    from precompute.fields.spec import FieldSpec

__all__ = [
    "BUILTIN",
    "GROUP",
    "KINDS",
    "add_entry",
    "entry_for",
    "has_kind",
    "kind_of",
    "load_plugins",
    "register_kind",
]

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
# The kind modules of this distribution, in the order they register (their source readers are
# asked in this order); also its entry points (pyproject.toml)
BUILTIN = (
    "precompute.kinds.image",
    "precompute.kinds.mask",
    "precompute.kinds.keypoints",
    "precompute.kinds.label",
    "precompute.kinds.labels",
    "precompute.kinds.audio",
    "precompute.kinds.array",
    "precompute.kinds.position",
    "precompute.kinds.boxes",
)
_loaded: list[bool] = []
_loading = threading.local()  # this thread is importing the kind modules
# Kind plugins left out, and why: "NAME = 'module' (nostall.kinds): the error"
_BROKEN: list[str] = []


def load_plugins() -> None:
    """Import every kind module (built in, then the entry points'), once per process.

    Threads that look a kind up at once each import the modules (Python imports each once and
    makes the others wait for it), so none returns before every kind is registered; within the
    importing thread a kind module that looks kinds up as it registers returns at once.

    A plugin that fails to import (any exception), or that defines a kind under a name another
    module's kind holds, is left out with a ``RuntimeWarning`` naming its entry point: the
    other kinds, and stores that do not use it, keep working; a field of a kind that is not
    registered then names the plugins left out (:func:`kind_of`).
    """
    if _loaded or getattr(_loading, "now", False):
        return
    _loading.now = True
    try:
        for module in BUILTIN:
            importlib.import_module(module)
        for ep in entry_points(group=GROUP):
            if ep.value in BUILTIN:
                continue
            problem = _load_plugin(ep)
            if problem is not None:
                _BROKEN.append(f"{ep.name} = {ep.value!r} ({GROUP}): {problem}")
                warnings.warn(f"the kind plugin {_BROKEN[-1]}; left out", RuntimeWarning, 2)
    finally:
        _loading.now = False
    _loaded.append(True)


def _load_plugin(ep: EntryPoint) -> str | None:
    """Import the kind module of ``ep``; what is wrong with it, or None."""
    try:
        module = ep.load()
    except Exception as exc:  # a plugin's own code: any error it raises leaves it out
        return f"{type(exc).__name__}: {exc}"
    package = ep.module.split(".")[0]
    for obj in vars(module).values():  # its kind classes: is each one's name its own?
        if not (isinstance(obj, type) and issubclass(obj, Kind)):
            continue
        name = getattr(obj, "name", None)
        if obj.__module__.split(".")[0] != package or not isinstance(name, str):
            continue
        holder = _KINDS.get(name)
        if holder is not None and type(holder).__module__.split(".")[0] != package:
            return (
                f"its kind {obj.__name__} is named {name!r}, the name of the kind of "
                f"{type(holder).__module__}: a kind needs a name of its own"
            )
    return None


_KINDS: dict[str, Kind] = {}


class _Registry(Mapping[str, Kind]):
    """The kinds by name, read-only; the kind modules are loaded on the first look-up."""

    def __getitem__(self, name: str) -> Kind:
        load_plugins()
        return _KINDS[name]

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(sorted(_KINDS, key=_builtin_rank))

    def __len__(self) -> int:
        load_plugins()
        return len(_KINDS)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in _KINDS


def _builtin_rank(name: str) -> int:
    """The kinds in :data:`BUILTIN` order, then the plugins' in registration order.

    Iteration must not depend on which module a process happened to import first (a test or
    a Ray worker that imports one kind module directly registers it before the others).
    """
    module = type(_KINDS[name]).__module__
    for rank, builtin in enumerate(BUILTIN):
        if module == builtin or module.startswith(builtin + "."):
            return rank
    return len(BUILTIN)


KINDS: Mapping[str, Kind] = _Registry()


def register_kind(kind: Kind) -> Kind:
    """Add ``kind`` to the registry under its name (a second kind of that name is refused).

    Raises:
        SpecError: The name is taken, or the kind's ``name`` or ``source`` is not one.
    """
    name, source = getattr(kind, "name", None), getattr(kind, "source", None)
    if not isinstance(name, str) or not name.isidentifier() or not name.islower():
        raise SpecError(f"{type(kind).__name__}.name must be a lower-case identifier, got {name!r}")
    if source not in ("file", "inline"):
        raise SpecError(f"{type(kind).__name__}.source must be 'file' or 'inline', got {source!r}")
    return add_entry(_KINDS, "field kind", name, kind)


def has_kind(name: str) -> bool:
    """Whether a kind ``name`` is registered, without loading the kind modules.

    What a kind module asks before registering itself (a Ray worker may have the kind
    already, sent with the job: ``precompute.pipeline.fieldwork.ensure_backends``).
    """
    return name in _KINDS


def kind_of(name: Any, field: str = "?") -> Kind:
    """Return the registered kind ``name``; a :class:`SpecError` naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        why = (
            f"; kind plugins left out: {'; '.join(_BROKEN)}"
            if _BROKEN
            else f" (a kind of another package needs that package installed: {GROUP})"
        )
        raise SpecError(f"fields.{field}.kind must be one of {sorted(KINDS)}, got {name!r}{why}")
    return _KINDS[name]
