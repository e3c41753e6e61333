"""Fixed class lists: one class index per name in every split of a dataset.

Without one, a build learns its classes from the source: class folders (every folder is a
class, empty ones too) or the class names a manifest's lines give, sorted. A validation
manifest that lacks one class then builds one class fewer, and every later name moves down one
index. A **fixed class list** (the spec's ``classes``: ``--classes a,b,c``, ``--classes
@FILE``, ``--classes-from STORE``) decides instead: a label is the position of its name in the
list, whatever the source holds.

- :func:`precompute.spec.check_classes` is the spec's rule for the list (names, unique, in
  order).
- :func:`classes_flag` reads ``--classes`` (``a,b,c``, or ``@FILE``: one name per line) and
  ``--classes-from STORE`` (:func:`store_classes`: the list a store was built with).
- :func:`fix_classes` applies a list to a listed source, for every field whose kind takes class
  names (``Kind.class_names``: a v1 store's label, ``label``, ``labels``): names are indexed
  by their position in the list (a ``ClassLabel``'s integers by their names), integer labels
  are kept as indices into it; a name (or an index) the list lacks is a per-input error under
  ``on_error`` naming the input and the name. Classes no input names are kept (the build's
  ``empty_classes`` note names them). :func:`fixed_fields` gives those fields the list's
  class count.

The list is part of the spec, so of the spec hash and the cache key: it decides the label
bytes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from precompute.errors import SourceError, SpecError
from precompute.fields import FieldSpec
from precompute.sources.fields import FieldSource
from precompute.sources.listing import per_input
from precompute.spec import check_classes

__all__ = [
    "class_fields",
    "classes_flag",
    "fix_classes",
    "fixed_fields",
    "store_classes",
]

_FILE_BYTES = 64 << 20  # a --classes @FILE larger than this is refused unread


def _read_names(path: str) -> list[str]:
    """``@FILE``: one class name per line (UTF-8; blank lines ignored, names stripped)."""
    from precompute.sources.inputs import read_input

    try:
        text = read_input(path, _FILE_BYTES).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"--classes @{path}: cannot read the class list ({exc})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def store_classes(store: str) -> tuple[str, ...]:
    """The class list of the complete store ``store``: its fixed list, else its class names.

    A v1 store's classes; a store with fields: the classes of its one field of class names
    (of ``label`` when it has several).

    Raises:
        SpecError: The store cannot be opened, or holds no class names (integer labels) or
            several fields of them none called ``label``.
    """
    from precompute.errors import StoreError
    from precompute.format.layout import open_store_info

    try:
        info = open_store_info(store)
    except (StoreError, OSError) as exc:
        raise SpecError(f"--classes-from {store}: {exc}") from None
    if info.spec.classes:
        return info.spec.classes
    found = info.report.get("classes")
    by_field = found if isinstance(found, dict) else {"label": found or []}
    named = {f: list(n) for f, n in by_field.items() if n}
    if len(named) > 1 and "label" not in named:
        raise SpecError(
            f"--classes-from {store}: the store names the classes of {sorted(named)}; give "
            "the list of one with --classes"
        )
    names = named.get("label") or next(iter(named.values()), [])
    if not names:
        raise SpecError(
            f"--classes-from {store}: the store has no class names (its labels are integers "
            "as given); give --classes"
        )
    return check_classes(names)


def classes_flag(text: str | None, store: str | None) -> list[str] | None:
    """The spec's ``classes`` from ``--classes`` and ``--classes-from`` (None: neither given).

    ``--classes a,b,c`` (names around commas stripped), ``--classes @FILE`` (one name per
    line: names that hold commas), ``--classes-from STORE`` (:func:`store_classes`).

    Raises:
        SpecError: Both given, an empty list, an unreadable file or store, a bad name.
    """
    if text is not None and store is not None:
        raise SpecError("--classes and --classes-from exclude each other: give one")
    if store is not None:
        return list(store_classes(store))
    if text is None:
        return None
    names = _read_names(text[1:]) if text.startswith("@") else [n.strip() for n in text.split(",")]
    if not names or names == [""]:
        raise SpecError(f"--classes {text!r} names no class")
    try:
        return list(check_classes(names))
    except SpecError as exc:
        raise SpecError(
            f"--classes {text if len(text) < 60 else text[:57] + '...'}: {exc}"
        ) from None


def class_fields(fields: Sequence[FieldSpec], source: FieldSource) -> list[FieldSpec]:
    """The fields of ``source`` whose kind takes class names (a fixed list applies to them)."""
    return [f for f in fields if f.spec.class_names and f.name in source.fields]


def fixed_fields(fields: Sequence[FieldSpec], classes: Sequence[str]) -> tuple[FieldSpec, ...]:
    """``fields`` with the class count of ``classes`` in each field of class names."""
    if not classes:
        return tuple(fields)
    return tuple(
        f.with_options(classes=len(classes))
        if f.spec.class_names and "classes" in f.spec.options
        else f
        for f in fields
    )


def _index(names: tuple[str, ...] | None, classes: Sequence[str]) -> dict[int, int]:
    """A source's label -> its index in ``classes`` (labels whose name the list lacks: none)."""
    if names is None:  # integers as given: indices into the list
        return {i: i for i in range(len(classes))}
    at = {name: i for i, name in enumerate(classes)}
    return {i: at[name] for i, name in enumerate(names) if name in at}


def _missing(field: str, label: int, names: tuple[str, ...] | None, n: int) -> str:
    if names is None:
        return f"{field} {label} is no index of the {n} classes of --classes (0..{n - 1})"
    return f"{field} {names[label]!r} is not one of the {n} classes of --classes"


def fix_classes(
    src: str | os.PathLike[str],
    source: FieldSource,
    fields: Sequence[FieldSpec],
    classes: Sequence[str],
    on_error: str,
) -> FieldSource:
    """``source`` with the labels of its fields of class names indexed by ``classes``.

    Nothing changes without a list. An input whose label (one of its labels) the list lacks is
    a per-input error: a :class:`SourceError` naming ``src``, the input and the name under
    ``raise``; left out and recorded in ``skipped`` under ``skip``.

    Raises:
        SpecError: A list for a source without a field of class names (a segmentation folder).
        SourceError: Under ``raise``, a label the list lacks.
    """
    if not classes:
        return source
    targets = class_fields(fields, source)
    if not targets:
        raise SpecError(
            f"{src}: --classes names the classes of a label; this source has none "
            f"(fields: {', '.join(source.fields)})"
        )
    listed = dict(source.classes)
    index = {f.name: _index(listed.get(f.name), classes) for f in targets}
    items, skipped = [], list(source.skipped)
    for item in source.items:
        values, why = dict(item.values), None
        for f in targets:
            value = values[f.name]
            labels = list(value) if isinstance(value, (list, tuple)) else [value]
            bad = [v for v in labels if v not in index[f.name]]
            if bad:
                why = _missing(f.name, bad[0], listed.get(f.name), len(classes))
                break
            mapped = [index[f.name][v] for v in labels]
            values[f.name] = tuple(mapped) if isinstance(value, (list, tuple)) else mapped[0]
        if why is None:
            items.append(dataclasses.replace(item, values=tuple(values.items())))
        else:
            per_input(os.fspath(src), on_error, skipped, item.key, why)
    if not items:
        raise SourceError(f"{src}: no input has a class of --classes ({len(skipped)} left out)")
    table = dict(source.classes) | {f.name: tuple(classes) for f in targets}
    return dataclasses.replace(
        source,
        items=tuple(items),
        classes=tuple(sorted(table.items())),
        skipped=tuple(sorted(skipped)),
    )
