"""List a raw dataset with named fields: a segmentation folder or a manifest of field columns.

A :class:`FieldSource` is the frozen, sorted list of :class:`FieldItem` a v2 build reads:
per item, the location of each file field (image, mask) and the parsed value of each inline
field (keypoints, label, labels). Like :class:`precompute.sources.classes.Source`, it is a pure
function of the files, and every read goes through :mod:`precompute.sources.inputs`.

- **Segmentation folder** (:func:`list_segmentation`): ``SRC/images/<name>.*`` and
  ``SRC/masks/<name>.*`` paired by their path without the extension (sub-folders allowed).
  An image without a mask, a mask without an image, and two files of one stem are per-input
  errors: under ``on_error: raise`` a :class:`~precompute.errors.SourceError` naming the file,
  under ``skip`` recorded in ``skipped``. The folder is listed by
  :func:`precompute.sources.folders.walk_classes` (symlinks leaving the root, loops, FIFOs
  recorded).
- **Manifest** (:func:`list_field_manifest`, ``.csv`` with a header row, or ``.jsonl``): one
  column (key) per field, named as the field; a file field holds a path (relative paths
  resolve against the manifest's folder), an inline field a value its kind parses
  (keypoints: a JSON list of ``[x, y]`` or ``[x, y, v]``; label: an integer or a class name;
  labels: a JSON list of them). A bad cell is a per-line error under ``on_error``; a keypoint
  count that differs between lines, a duplicate path, or labels mixing integers and names
  are a :class:`SourceError`. Class names are sorted; a label is the index of its name. A
  relative path inside the manifest's folder whose symlinks lead out of it is recorded in
  ``skipped`` (``symlink leaves the source root; not followed``), as in a folder source.
  A manifest may be an fsspec URL (its paths resolve against the URL's folder); a
  segmentation folder must be local.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from precompute.errors import SourceError
from precompute.fields import FieldSpec, check_fields
from precompute.fields.labels import name_classes
from precompute.sources.classes import Source
from precompute.sources.folders import (
    ESCAPES,
    SEGMENTATION,
    OnceEach,
    escapes,
    is_folder,
    walk_classes,
)
from precompute.sources.inputs import DEFAULT_MAX_BYTES, READ_DEADLINE_S, open_input, read_input
from precompute.sources.listing import check_policy, is_url, per_input
from precompute.sources.rows import csv_rows, jsonl_rows, read_text

__all__ = [
    "ClassSource",
    "FieldItem",
    "FieldSource",
    "is_segmentation",
    "list_field_manifest",
    "list_segmentation",
    "same_counts",
]


@dataclass(frozen=True)
class FieldItem:
    """One sample: its key (the path of its first file field) and its fields.

    Attributes:
        key: The item's key, unique in the source (sorting and reports use it).
        files: ``(field, path)`` of each file field; paths as :attr:`Source.items` keys are.
        values: ``(field, value)`` of each inline field, as its kind parsed it.
    """

    key: str
    files: tuple[tuple[str, str], ...] = ()
    values: tuple[tuple[str, Any], ...] = ()

    def file(self, field: str) -> str:
        """The path of file field ``field``."""
        return dict(self.files)[field]

    def value(self, field: str) -> Any:
        """The parsed value of inline field ``field``."""
        return dict(self.values)[field]


@dataclass(frozen=True)
class FieldSource:
    """A listed dataset with named fields.

    Attributes:
        root: The source root (absolute local folder) every relative path resolves against.
        fields: The field names every item carries, in column order.
        items: Items sorted by key.
        classes: ``(field, class names)`` of label fields given by name (index = label).
        skipped: ``(key, reason)`` of entries left out while listing.
        splits: Each item's part from a manifest's ``split`` column (``""``: none); empty
            without one (``precompute.splits.manifest``).
    """

    root: str
    fields: tuple[str, ...]
    items: tuple[FieldItem, ...]
    classes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    splits: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    def locate(self, path: str) -> str:
        """Return the local path or URL of a file field's ``path``."""
        return Source(self.root, (), ()).locate(path)

    def read_bytes(
        self,
        item: FieldItem,
        field: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline_s: float = READ_DEADLINE_S,
    ) -> bytes:
        """Return the bytes of ``item``'s file field ``field``, read safely.

        Raises:
            InputError: Not a regular file, larger than ``max_bytes``, or stuck.
            OSError: Missing or unreadable.
        """
        return self.read_counted(item, field, max_bytes, deadline_s)[0]

    def open_input(self, item: FieldItem, field: str) -> IO[bytes]:
        """``item``'s file field ``field`` as a seekable binary stream (part of a long file).

        Raises:
            InputError: Not a regular file.
            OSError: The file cannot be opened.
        """
        return open_input(self.locate(item.file(field)))

    def read_counted(
        self,
        item: FieldItem,
        field: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline_s: float = READ_DEADLINE_S,
    ) -> tuple[bytes, int]:
        """:meth:`read_bytes` and how many bytes this call read from storage (the report's).

        A source that serves repeated reads from a cache (:class:`SceneSource`) overrides
        this alone, and answers 0 for a read its cache served.
        """
        data = read_input(self.locate(item.file(field)), max_bytes, deadline_s)
        return data, len(data)

    def fingerprint(self, content_hash: bool = False) -> str:
        """The source fingerprint: every field's files (stat or content) and inline values.

        :func:`precompute.sources.digests.field_fingerprint`; a source with a fingerprint of
        its own (class folders, a scene) overrides this.
        """
        from precompute.sources.digests import field_fingerprint

        return field_fingerprint(self, content_hash)


class ClassSource(FieldSource):
    """Class folders or a ``path,label`` manifest as a source of fields ``image`` + ``label``.

    The one build pipeline reads it like any other source of fields; the store it makes is
    format v1 (``image``, ``label``, ``extent``, ``key``: the layout's v1 profile), and its
    fingerprint is the v1 one (:func:`precompute.sources.digests.fingerprint` of the listed
    :class:`~precompute.sources.classes.Source`), so stores and cache keys built before the one
    pipeline keep their identity.
    """

    @classmethod
    def of(cls, source: Source) -> ClassSource:
        """The items of a listed class-folder or ``path,label`` source, as fields."""
        items = tuple(
            FieldItem(key, (("image", key),), (("label", label),)) for key, label in source.items
        )
        classes = (("label", source.classes),) if source.classes else ()
        return cls(source.root, ("image", "label"), items, classes, source.skipped)

    def as_source(self) -> Source:
        """The :class:`~precompute.sources.classes.Source` this was listed as."""
        names = dict(self.classes).get("label", ())
        pairs = tuple((item.key, int(item.value("label"))) for item in self.items)
        return Source(self.root, pairs, tuple(names), self.skipped)

    def fingerprint(self, content_hash: bool = False) -> str:
        """The v1 source fingerprint (:func:`precompute.sources.digests.fingerprint`)."""
        from precompute.sources.digests import fingerprint

        return fingerprint(self.as_source(), content_hash=content_hash)


# -- segmentation folders --------------------------------------------------------------------


def _by_stem(
    src: str, keys: list[str], on_error: str, skipped: list[tuple[str, str]]
) -> dict[str, str]:
    """``stem -> key`` of one folder's files (``images/a/b.png`` -> ``a/b``)."""
    out: dict[str, str] = {}
    for key in sorted(keys):
        stem = os.path.splitext(key.split("/", 1)[1])[0]
        if stem in out:
            why = f"another file has the same name {stem!r} ({out[stem]})"
            per_input(src, on_error, skipped, key, why)
            continue
        out[stem] = key
    return out


def _left_out(found: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
    """``(folder, stem) -> (key, reason)`` of the files the listing left out (a link out)."""
    out = {}
    for key, why in found:
        top, _, rest = key.partition("/")
        if top in SEGMENTATION and rest:
            out[top, os.path.splitext(rest)[0]] = (key, why)
    return out


def _why(found: list[tuple[str, str]]) -> str:
    """``: N entries were left out while listing (e.g. KEY: reason)``, or nothing."""
    if not found:
        return ""
    key, why = min(found)
    what = "1 entry was" if len(found) == 1 else f"{len(found)} entries were"
    return f": {what} left out while listing (e.g. {key}: {why})"


def is_segmentation(src: str) -> bool:
    """Whether ``src`` is a local folder whose sub-folders are exactly ``images/`` + ``masks/``."""
    path = src.removeprefix("file://")
    if "://" in path or not os.path.isdir(path):
        return False
    try:
        with os.scandir(path) as it:
            subs = {e.name for e in it if not e.name.startswith(".") and is_folder(e)}
    except OSError:  # the listing says why
        return False
    return subs == set(SEGMENTATION)


def list_segmentation(src: str | os.PathLike[str], on_error: str = "raise") -> FieldSource:
    """List ``SRC/images/<name>.*`` + ``SRC/masks/<name>.*`` as fields ``image`` and ``mask``.

    Raises:
        SourceError: No such folder, no ``images/`` or ``masks/`` in it, no pair at all, or
            (under ``on_error: raise``) a file without its pair.
    """
    check_policy(on_error)
    src = os.fspath(src).removeprefix("file://")
    if is_url(src):
        raise SourceError(
            f"{src}: a segmentation folder must be a local folder (for a URL, "
            "list the pairs in a manifest with image and mask columns)"
        )
    root = os.path.abspath(src)
    missing = [d for d in SEGMENTATION if not os.path.isdir(os.path.join(root, d))]
    if missing:
        raise SourceError(
            f"{src}: a segmentation source needs the folders images/ and masks/ "
            f"(missing: {', '.join(d + '/' for d in missing)})"
        )
    listed, classes, found = walk_classes(root)
    skipped = list(found)
    folder = {name: [k for k, label in listed if classes[label] == name] for name in SEGMENTATION}
    images = _by_stem(src, folder["images"], on_error, skipped)
    masks = _by_stem(src, folder["masks"], on_error, skipped)
    left = _left_out(found)
    for have, want, partner, where in (
        (images, masks, "mask", "masks"),
        (masks, images, "image", "images"),
    ):
        for stem in sorted(set(have) - set(want)):
            if (where, stem) in left:  # its partner was left out while listing: so is it
                key, why = left[where, stem]
                skipped.append((have[stem], f"its {partner} {key} was left out: {why}"))
            else:
                per_input(src, on_error, skipped, have[stem], f"no {partner} {where}/{stem}.*")
    pairs = sorted(set(images) & set(masks))
    if not pairs:
        raise SourceError(
            f"{src}: no image has its mask (images/<name>.* + masks/<name>.*){_why(found)}"
        )
    items = tuple(FieldItem(images[s], (("image", images[s]), ("mask", masks[s]))) for s in pairs)
    return FieldSource(root, ("image", "mask"), items, (), tuple(sorted(skipped)))


# -- manifests -------------------------------------------------------------------------------


def _cell(field: FieldSpec, row: dict[str, Any]) -> Any:
    """The parsed cell of ``field``; ``ValueError`` for a per-line error."""
    if field.name not in row or row[field.name] in ("", None):
        raise ValueError(f"no {field.name}")
    raw = row[field.name]
    if field.spec.source == "inline":
        return field.spec.parse_inline(raw)
    if not isinstance(raw, str) or "\0" in raw:
        raise ValueError(f"{field.name} must be a file path, got {json.dumps(raw)[:40]}")
    return raw if is_url(raw) else raw.replace("\\", "/")


def same_counts(
    src: str, fields: Sequence[FieldSpec], rows: Sequence[tuple[str, Mapping[str, Any]]]
) -> None:
    """Every row gives the count of entries (``Kind.count_option``: points) of the first.

    ``rows`` are ``(where, cells)``: the row's place for the message (``line 3``) and its
    parsed inline cells. The count is the option's value when set, else the first row's.

    Raises:
        SourceError: A row with another count, naming its place.
    """
    for f in fields:
        if f.spec.count_option is None or not rows:
            continue
        want = f.options[f.spec.count_option] or len(rows[0][1][f.name])
        for where, cells in rows:
            if len(cells[f.name]) != want:
                raise SourceError(
                    f"{src}: {where}: {len(cells[f.name])} {f.kind} in {f.name!r}; every "
                    f"sample needs {want}"
                )


def list_field_manifest(
    src: str | os.PathLike[str],
    fields: Sequence[FieldSpec],
    on_error: str = "raise",
    text: str | None = None,
) -> FieldSource:
    """List a CSV/JSONL manifest with one column per field of ``fields``.

    ``text``: the manifest's text when the caller has read it already (read here if None).

    Raises:
        SourceError: The manifest is missing or malformed, lacks a field's column, has no
            file field, a duplicate path, keypoint counts that differ, labels mixing integers
            and names, no usable line, or (``on_error: raise``) a bad cell.
    """
    check_policy(on_error)
    fields = check_fields(fields)
    src = os.fspath(src).removeprefix("file://")
    keyed = [f.name for f in fields if f.spec.source == "file"]
    if not keyed:
        raise SourceError(f"{src}: a manifest needs at least one file field (an image path)")
    text = read_text(src) if text is None else text
    names = [f.name for f in fields]
    raw = csv_rows(src, text, names) if src.lower().endswith(".csv") else jsonl_rows(src, text)
    root = src.rsplit("/", 1)[0] if is_url(src) else os.path.dirname(os.path.abspath(src))
    rows: list[tuple[int, dict[str, Any]]] = []
    skipped: list[tuple[str, str]] = []
    for n, row in raw:
        key = str(row.get(keyed[0]) or f"line {n}")
        try:
            cells = {f.name: _cell(f, row) for f in fields}
        except ValueError as exc:
            per_input(src, on_error, skipped, key, f"line {n}: {exc}")
            continue
        if any(escapes(root, cells[k]) for k in keyed):
            skipped.append((cells[keyed[0]], ESCAPES))
            continue
        rows.append((n, cells))
    if not rows:
        raise SourceError(f"{src}: manifest lists no usable samples")
    same_counts(src, fields, [(f"line {n}", cells) for n, cells in rows])
    classes = name_classes(src, fields, rows)
    return FieldSource(
        root, tuple(names), _items(src, root, fields, keyed, rows), classes, tuple(sorted(skipped))
    )


def _items(
    src: str,
    root: str,
    fields: Sequence[FieldSpec],
    keyed: list[str],
    rows: list[tuple[int, dict[str, Any]]],
) -> tuple[FieldItem, ...]:
    items: dict[str, FieldItem] = {}
    once = OnceEach(src, root)
    for n, cells in rows:
        key = cells[keyed[0]]
        once.add(f"line {n}", key)
        files = tuple((k, cells[k]) for k in keyed)
        inline = tuple((f.name, cells[f.name]) for f in fields if f.name not in keyed)
        items[key] = FieldItem(key, files, inline)
    return tuple(items[k] for k in sorted(items))
