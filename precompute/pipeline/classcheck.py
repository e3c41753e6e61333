"""A loud warning where a build's class names would shift labels against another split's store.

Without a fixed class list (``--classes``), a manifest's classes are the names its lines give,
sorted: a validation manifest that lacks one class builds one class fewer, and every later
name gets another index than in the training store (``chirp`` 1 there, ``frog`` 1 here),
silently. Before its shards run, a build whose classes it learned from the source compares
them with those of the complete stores at ``--out`` and beside it that were built from the
same source root (the folder of the manifests, or the class folder itself), and warns
(:class:`~precompute.errors.ClassListWarning`) naming the store, a name whose index differs,
and ``--classes-from`` to fix it. The cache compares a store it built with the stores it holds
for the same source root (``service``). Reading the stores beside ``--out`` is best effort:
one that cannot be read is not compared.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from precompute.errors import ClassListWarning, PrecomputeError
from precompute.sources.classes import MANIFEST_EXTENSIONS
from precompute.storage.location import Location, is_url

__all__ = ["class_shift", "classes_of", "source_root", "warn_class_shifts"]

# Sources that are one file: their root is the file's folder.
_FILES = (*MANIFEST_EXTENSIONS, ".json", ".parquet", ".tar", ".npy", ".npz", ".mat", ".tif")
_SIBLINGS = 64  # stores beside --out compared at most (a folder of many stores: the first)


def source_root(src: str) -> str:
    """The folder ``src``'s paths start from: a file's folder, a folder itself."""
    path = src.removeprefix("file://").rstrip("/")
    if is_url(path):
        return path.rsplit("/", 1)[0] if path.lower().endswith(_FILES) else path
    path = os.path.abspath(path)
    return path if os.path.isdir(path) else os.path.dirname(path)


def classes_of(report: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Class names by field of a build report (v1: ``label``); fields without names left out."""
    found = report.get("classes")
    by_field = found if isinstance(found, Mapping) else {"label": found or ()}
    return {str(f): tuple(map(str, n)) for f, n in by_field.items() if n}


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])}, ..."


def _how(mine: Sequence[str], theirs: Sequence[str]) -> str:
    """How the two lists index names differently (the first name that moves, or the count)."""
    at = {name: i for i, name in enumerate(theirs)}
    moved = next((n for i, n in enumerate(mine) if n in at and at[n] != i), None)
    if moved is not None:
        return f"{moved!r} is {mine.index(moved)} here and {at[moved]} there"
    lost = [n for n in theirs if n not in set(mine)]
    if lost:
        return f"{lost[0]!r} is not a class here"
    return f"{next(n for n in mine if n not in at)!r} is not a class there"


def class_shift(
    src: str,
    mine: Mapping[str, Sequence[str]],
    store: str,
    report: Mapping[str, Any],
    fix: str | None = None,
) -> str | None:
    """The warning for a build of ``src`` with classes ``mine`` beside ``store``; None if none.

    Only stores built from ``src``'s source root are compared, and only fields both name.
    ``fix``: how to give both builds one class list (default: the command-line flags).
    """
    theirs_src = str(report.get("source", ""))
    if not theirs_src or source_root(theirs_src) != source_root(src):
        return None
    theirs = classes_of(report)
    for field, names in mine.items():
        other = theirs.get(field)
        if other is None or tuple(other) == tuple(names):
            continue
        where = "" if field == "label" else f"{field} "
        return (
            f"{src} builds {where}{len(names)} classes ({_names(names)}) but {store}, built "
            f"from the same folder ({theirs_src}), has {len(other)} ({_names(other)}): "
            f"{_how(names, other)}, so one label means two classes; give both builds one list "
            f"({fix or f'--classes-from {store}, or --classes'})"
        )
    return None


def _stores(out: Location) -> Iterator[tuple[Location, Mapping[str, Any]]]:
    """``out`` and the stores beside it, each with its report (complete stores only)."""
    from precompute.pipeline.outputs import complete_attrs

    parent = out.parent
    try:
        names = [n for n in parent.store.list_dir(parent.key) if n != out.name][:_SIBLINGS]
    except OSError:
        names = []
    for where in (out, *(parent / n for n in names)):
        try:
            attrs = complete_attrs(where)
        except (PrecomputeError, OSError, ValueError):  # not a store, or unreadable: none
            continue
        if attrs is not None and isinstance(attrs.get("report"), Mapping):
            yield where, attrs["report"]


def warn_class_shifts(
    src: str, classes: Mapping[str, Sequence[str]], fixed: bool, out: Location
) -> list[str]:
    """Warn for each store at or beside ``out`` whose classes a build of ``src`` would shift.

    ``classes``: the build's class names by field; ``fixed``: they come from the spec
    (``--classes``), which nothing is compared against. Returns the warnings given.
    """
    if fixed or not any(classes.values()):
        return []
    said = []
    for where, report in _stores(out):
        text = class_shift(src, classes, str(where), report)
        if text is not None:
            warnings.warn(text, ClassListWarning, stacklevel=2)
            said.append(text)
    return said
