"""List a dataset of array files as a :class:`~precompute.sources.fields.FieldSource`.

Two layouts, each giving fields ``image`` (kind ``array``, a file field) and ``label``:

* **Class folders** ``SRC/<class>/**/<file>`` of ``.npy``, ``.npz``, ``.tif``/``.tiff`` and
  ``.mat`` files (the ``array`` kind's ``extensions``); classes are the
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

from precompute.fields import KINDS
from precompute.sources.classes import list_class_files
from precompute.sources.fields import FieldItem, FieldSource

__all__ = ["FIELDS", "list_arrays"]

FIELDS = ("image", "label")


def list_arrays(
    src: str | os.PathLike[str], on_error: str = "raise", text: str | None = None
) -> FieldSource:
    """List class folders or a ``path,label`` manifest of array files as ``image`` + ``label``.

    The one lister of class folders and manifests
    (:func:`precompute.sources.classes.list_class_files`) with the ``array`` kind's extensions,
    every manifest path checked against them.

    Args:
        src: A folder of class folders, or a ``.csv``/``.jsonl``/``.ndjson`` manifest.
        on_error: ``raise`` or ``skip`` (a bad manifest line is recorded in ``skipped``).
        text: The manifest's text when the caller has read it already (read here if None).

    Raises:
        SourceError: No such folder, no class folder, no array file, a malformed manifest, a
            duplicate path, or (``on_error: raise``) a manifest line that is no array file.
    """
    listed = list_class_files(src, KINDS["array"], on_error, text, check_paths=True)
    items = tuple(FieldItem(k, (("image", k),), (("label", label),)) for k, label in listed.items)
    named = (("label", listed.classes),) if listed.classes else ()
    return FieldSource(listed.root, FIELDS, items, named, listed.skipped)
