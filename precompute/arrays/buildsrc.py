"""Array files as a build source: detection, the inferred ``image`` + ``label`` fields, listing.

A class-folder tree or a ``path,label`` manifest is an **array source** when the first data
file found (folders walked in name order; the manifest's first line) is a ``.npy``, ``.npz``
or ``.mat`` file. TIFF files are read as images unless the spec's fields say otherwise (an
``array`` field named ``image``, e.g. ``--fields``), since the extension cannot tell a
multi-page cube from a picture.

:func:`infer_array_fields` reads the first file once to learn the field ``image`` of kind
``array``: ``shape`` and ``dtype`` as stored, ``spatial`` for an ``(H, W, C)`` array (any
other rank is stored as given, untouched by geometry), ``key`` from ``--key``. Every other
file must then have that shape and dtype: a file that differs is a per-input
:class:`~precompute.errors.DecodeError` naming it and both shapes (the build's ``on_error``).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.arrays.readers import ARRAY_EXTENSIONS, read_array
from precompute.arrays.sources import FIELDS, list_arrays
from precompute.errors import DecodeError, InputError, SourceError, SpecError
from precompute.fields import FieldSpec
from precompute.sources.fields import FieldSource
from precompute.sources.folders import ARRAY_ONLY_EXTENSIONS, IMAGE_EXTENSIONS
from precompute.sources.manifests import jsonl_objects, read_manifest_text

__all__ = ["infer_array_fields", "is_array_fields", "is_array_source", "list_array_fields"]

_MANIFESTS = (".csv", ".jsonl", ".ndjson")


def _first_folder_file(root: str) -> str | None:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if folder == root:
            continue  # files at the top are not in a class folder
        for name in sorted(f for f in files if not f.startswith(".")):
            if os.path.splitext(name)[1].lower() in (*IMAGE_EXTENSIONS, *ARRAY_EXTENSIONS):
                return name
    return None


def _first_manifest_path(src: str, text: str | None) -> str | None:
    try:
        text = read_manifest_text(src) if text is None else text
        if src.lower().endswith(".csv"):
            rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
            if len(rows) < 2 or "path" not in [c.strip() for c in rows[0]]:
                return None
            return rows[1][[c.strip() for c in rows[0]].index("path")]
        docs = jsonl_objects(src, text)
    except (SourceError, csv.Error, IndexError):
        return None  # the v1 lister says what is wrong with it
    path = docs[0][1].get("path") if docs else None
    return path if isinstance(path, str) else None


def is_array_source(src: str, text: str | None = None) -> bool:
    """Whether ``src`` (class folders or a ``path,label`` manifest) holds array files.

    ``text``: the manifest's text when the caller has read it already (read here if None).
    """
    local = src.removeprefix("file://")
    if local.lower().endswith(_MANIFESTS):
        first = _first_manifest_path(src, text)
    elif "://" not in local and os.path.isdir(local):
        first = _first_folder_file(local)
    else:
        return False
    return first is not None and os.path.splitext(first)[1].lower() in ARRAY_ONLY_EXTENSIONS


def is_array_fields(fields: Sequence[FieldSpec]) -> bool:
    """Whether ``fields`` are those of an array source: ``image`` of kind array, ``label``."""
    kinds = {f.name: f.kind for f in fields}
    return kinds == {"image": "array", "label": "label"}


def list_array_fields(
    src: str, fields: Sequence[FieldSpec], on_error: str, text: str | None = None
) -> FieldSource:
    """List ``src`` for an array source's ``fields`` (:func:`is_array_fields`).

    ``text``: the manifest's text when the caller has read it already (read here if None).

    Raises:
        SpecError: Other fields than ``image`` (array) and ``label``.
        SourceError: The source cannot be listed.
    """
    if not is_array_fields(fields):
        names = {f.name: f.kind for f in fields}
        raise SpecError(
            f"{src}: array files give the fields {list(FIELDS)} (image of kind array, "
            f"label); the spec names {names}"
        )
    return list_arrays(src, on_error, text)


def _options(src: str, options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    unused = sorted(set(options) - {"array"})
    if unused:
        raise SpecError(f"{src}: array files have no {unused} field; drop those options")
    return dict(options.get("array", {}))


def infer_array_fields(
    src: str, options: Mapping[str, Mapping[str, Any]] | None = None, text: str | None = None
) -> tuple[FieldSpec, FieldSpec]:
    """The fields of an array source, learned from its first file (read once).

    Args:
        src: Class folders or a manifest of array files.
        options: ``{"array": {"key": NAME}}``: the ``.npz`` member / ``.mat`` variable.
        text: The manifest's text when the caller has read it already (read here if None).

    Raises:
        SpecError: Options for fields the source does not have.
        SourceError: Nothing to list, or the first file cannot be read (naming it).
    """
    opts = _options(src, options or {})
    source = list_arrays(src, "skip", text)
    first = source.items[0]
    key = first.file("image")
    try:
        data = source.read_bytes(first, "image")
        value = read_array(data, key, key, opts.get("key"), allow_nonfinite=True)
    except (DecodeError, InputError, OSError) as exc:
        raise SourceError(f"{src}: cannot learn the array field from {key}: {exc}") from None
    image = FieldSpec(
        "image",
        "array",
        {"shape": list(value.shape), "dtype": value.dtype.name, "spatial": value.ndim == 3, **opts},
    )
    return image, FieldSpec("label", "label")
