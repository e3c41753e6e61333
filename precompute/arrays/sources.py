"""List a dataset of array files as a :class:`~precompute.sources.fields.FieldSource`.

Two layouts, each giving fields ``image`` (kind ``array``, a file field) and ``label``:

* **Class folders** ``SRC/<class>/**/<file>`` of ``.npy``, ``.npz``, ``.tif``/``.tiff`` and
  ``.mat`` files (:data:`~precompute.arrays.readers.ARRAY_EXTENSIONS`); classes are the
  folder names in name order, a label is the index of its folder. Hidden entries and other
  files are ignored, but image or audio files beside the arrays are refused (a
  :class:`SourceError` naming one of each kind), never dropped. Listed by
  :func:`precompute.sources.folders.walk_classes` (its rules: a symlink leaving the root, a name
  that is not UTF-8, an entry that cannot be examined and a non-regular array file are
  recorded in ``skipped``, not followed).
* **Manifest** (``.csv``/``.jsonl``/``.ndjson``) of ``path,label`` lines, parsed by
  :func:`precompute.sources.manifests.parse_manifest` (the rules of ``docs/manifests.md``); a path
  that is not an array file is a per-line error under ``on_error``.

Nothing is read from the array files here: a shape, band count or dtype that differs
between samples is a per-input error when the file is decoded (the ``array`` kind's
``check``).
"""

from __future__ import annotations

import os

from precompute.arrays.readers import ARRAY_EXTENSIONS
from precompute.errors import SourceError
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.folders import (
    AUDIO_EXTENSIONS,
    ESCAPES,
    IMAGE_EXTENSIONS,
    escapes,
    walk_classes,
)
from precompute.sources.listing import check_policy
from precompute.sources.manifests import parse_manifest, read_manifest_text

__all__ = ["FIELDS", "list_arrays"]

FIELDS = ("image", "label")
_MANIFESTS = (".csv", ".jsonl", ".ndjson")
_OTHER_KINDS = (IMAGE_EXTENSIONS | AUDIO_EXTENSIONS) - frozenset(ARRAY_EXTENSIONS)


def _is_array(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in ARRAY_EXTENSIONS


def _list_folder(src: str) -> FieldSource:
    root = os.path.abspath(src)
    if not os.path.isdir(root):
        raise SourceError(f"{src}: source folder does not exist (or is not a folder)")
    others: list[str] = []
    files, classes, skipped = walk_classes(
        root, frozenset(ARRAY_EXTENSIONS), alien=_OTHER_KINDS, aliens=others
    )
    if others:  # pictures or recordings beside the cubes: never dropped unsaid
        raise SourceError(
            f"{src}: mixes array files ({len(files)}, e.g. {min(files)[0] if files else 'none'})"
            f" and image or audio files ({len(others)}, e.g. {min(others)}): keep one kind "
            "per source folder"
        )
    if not classes:
        raise SourceError(f"{src}: no class sub-folders (expected SRC/<class>/<array file>)")
    items = [FieldItem(k, (("image", k),), (("label", label),)) for k, label in files]
    if not items:
        raise SourceError(
            f"{src}: no array files ({', '.join(ARRAY_EXTENSIONS)}) found under the class folders"
        )
    ordered = tuple(sorted(items, key=lambda i: i.key))
    return FieldSource(root, FIELDS, ordered, (("label", tuple(classes)),), tuple(sorted(skipped)))


def _list_manifest(src: str, on_error: str, text: str | None) -> FieldSource:
    text = read_manifest_text(src) if text is None else text
    rows, classes, skipped = parse_manifest(src, text, on_error)
    url = "://" in src
    root = src.rsplit("/", 1)[0] if url else os.path.dirname(os.path.abspath(src))
    items: dict[str, FieldItem] = {}
    for n, path, label in rows:
        key = path if "://" in path else path.replace("\\", "/")
        if key in items:
            raise SourceError(f"{src}: line {n}: duplicate path {key!r}")
        if not _is_array(key):
            why = f"line {n}: {key!r} is not an array file ({', '.join(ARRAY_EXTENSIONS)})"
            if on_error == "raise":
                raise SourceError(f"{src}: {why}")
            skipped.append((key, why))
        elif escapes(root, key):
            skipped.append((key, ESCAPES))
        else:
            items[key] = FieldItem(key, (("image", key),), (("label", label),))
    if not items:
        raise SourceError(f"{src}: manifest lists no array files")
    named = (("label", classes),) if classes else ()
    ordered = tuple(items[k] for k in sorted(items))
    return FieldSource(root, FIELDS, ordered, named, tuple(sorted(skipped)))


def list_arrays(
    src: str | os.PathLike[str], on_error: str = "raise", text: str | None = None
) -> FieldSource:
    """List class folders or a ``path,label`` manifest of array files as ``image`` + ``label``.

    Args:
        src: A local folder of class folders, or a ``.csv``/``.jsonl``/``.ndjson`` manifest.
        on_error: ``raise`` or ``skip`` (a bad manifest line is recorded in ``skipped``).
        text: The manifest's text when the caller has read it already (read here if None).

    Raises:
        SourceError: No such folder, no class folder, no array file, a malformed manifest, a
            duplicate path, or (``on_error: raise``) a manifest line that is no array file.
    """
    check_policy(on_error)
    src = os.fspath(src).removeprefix("file://")
    if src.lower().endswith(_MANIFESTS):
        return _list_manifest(src, on_error, text)
    if "://" in src:
        raise SourceError(f"{src}: array folders must be local; list remote files in a manifest")
    return _list_folder(src)
