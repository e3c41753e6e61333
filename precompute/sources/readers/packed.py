"""What the readers of packed datasets share: samples that are cells of a few container files.

A Parquet dataset (:mod:`~precompute.sources.readers.parquet`) keeps its samples in the rows of
``.parquet`` files, a WebDataset (:mod:`~precompute.sources.readers.webdataset`) in the members
of ``.tar`` shards. Both list as a :class:`PackedSource`: a
:class:`~precompute.sources.fields.FieldSource` whose file fields are cells of a container
(each item's ``FIELD.at`` value says where: a row group and row, or a member's offset and
size), read into memory by the source itself, never unpacked to disk. Here:

- :func:`container_files`: the container files of ``SRC`` (one file, or every such file below
  a local folder, sorted);
- :func:`holds`: whether a local folder is a packed source (the first folder level holding
  data files has containers), a cheap test that never walks a whole image tree;
- :func:`make_fields`: the fields a source has, by kind, with the CLI's options
  (:func:`inferred_fields`: those its columns or members gave, at least one a file);
- :func:`packed_items`: rows -> items under the build's ``on_error`` policy (class names
  indexed, keypoint counts checked, keys unique);
- :func:`packed_source`: a listed source of rows (what a reader's lister returns);
- :class:`PackedSource`: its fingerprint covers every container file (size and mtime, or its
  content), the column or suffix each field reads, and every item; a reader's subclass reads
  one cell (:meth:`PackedSource.read_cell`);
- :func:`register_packed`: a reader's registration as the build's source reader.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from precompute.errors import SourceError, SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.fields.labels import name_classes
from precompute.kinds.hooks import SourceQuery, SourceReader, register_source
from precompute.sources.digests import field_fingerprint
from precompute.sources.fields import FieldItem, FieldSource, same_counts
from precompute.sources.folders import (
    ARRAY_ONLY_EXTENSIONS,
    AUDIO_EXTENSIONS,
    IMAGE_EXTENSIONS,
    file_problem,
    is_folder,
    shown,
)
from precompute.sources.inputs import DEFAULT_MAX_BYTES, READ_DEADLINE_S, file_kind
from precompute.sources.listing import checkpoint, is_url, per_input

__all__ = [
    "PackedSource",
    "Row",
    "container_files",
    "holds",
    "inferred_fields",
    "make_fields",
    "packed_items",
    "packed_source",
    "pick_columns",
    "position",
    "register_packed",
]

# Extensions of the data files a folder source may hold (the containers add their own).
_DATA = IMAGE_EXTENSIONS | AUDIO_EXTENSIONS | ARRAY_ONLY_EXTENSIONS | {".parquet", ".tar"}
_PROBE_DEPTH = 4  # folder levels below SRC searched for its first data files


@dataclass(frozen=True)
class PackedSource(FieldSource):
    """A source of fields whose file fields are cells of container files.

    Attributes:
        containers: The container files' paths relative to ``root``, sorted.
        columns: ``(field, column or suffix)`` each field reads, sorted by field.
    """

    containers: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()

    def fingerprint(self, content_hash: bool = False) -> str:
        """Every container (size and mtime, or content), the columns read, and every item."""
        files = tuple(FieldItem(rel, (("container", rel),)) for rel in self.containers)
        h = hashlib.sha256(b"nostall.packed.v1\0")
        listed = FieldSource(self.root, ("container",), files)
        h.update(field_fingerprint(listed, content_hash).encode() + b"\0")
        h.update(json.dumps([self.columns, self.classes]).encode() + b"\0")
        for item in self.items:
            h.update(json.dumps([item.key, item.files, item.values]).encode() + b"\n")
        return h.hexdigest()

    def read_counted(
        self,
        item: Any,
        field: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline_s: float = READ_DEADLINE_S,
    ) -> tuple[bytes, int]:
        """The cell's bytes, and the bytes read from storage now (:meth:`read_cell`)."""
        rel, *at = position(item, field)
        return self.read_cell(self.locate(rel), at, item.file(field), max_bytes)

    def read_cell(self, path: str, at: list[Any], where: str, max_bytes: int) -> tuple[bytes, int]:
        """The bytes of the cell at ``at`` (its ``FIELD.at`` less the container) in ``path``.

        Raises:
            InputError: The cell cannot be read or is larger than ``max_bytes``, naming
                ``where`` (the cell's locator).
        """
        raise NotImplementedError(f"{type(self).__name__} reads no cell")

    def open_input(self, item: Any, field: str) -> IO[bytes]:
        """The cell's bytes as a stream (a decoder that reads part of a file gets them)."""
        return io.BytesIO(self.read_bytes(item, field))


def position(item: FieldItem, field: str) -> list[Any]:
    """Where ``item``'s file field ``field`` lies in its container (its ``FIELD.at`` value)."""
    return list(item.value(f"{field}.at"))


def _local(src: str, what: str) -> str:
    path = src.removeprefix("file://")
    if is_url(path):
        raise SourceError(f"{src}: a {what} source must be a local file or folder")
    return os.path.abspath(path)


def _one_file(src: str, path: str) -> None:
    """A source that is one container: a regular file (a link may lead anywhere).

    Raises:
        SourceError: Missing, a symlink loop, a FIFO or a device, naming ``src``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise SourceError(f"{src}: no such file or folder") from None
    except OSError as exc:  # a symlink loop, no permission
        raise SourceError(f"{src}: cannot read: {exc.strerror or type(exc).__name__}") from None
    kind = file_kind(mode)
    if kind is not None:
        raise SourceError(f"{src}: not a regular file ({kind})")


def container_files(
    src: str, suffix: str, what: str, skipped: list[tuple[str, str]]
) -> tuple[str, tuple[str, ...]]:
    """``(root, paths relative to it)`` of ``src``'s ``suffix`` files, sorted.

    ``src`` is one such file (the root is its folder) or a local folder searched recursively
    (hidden names left out). A container that cannot be used is recorded in ``skipped`` with
    its reason, as a folder listing records one: a symlink leaving the folder, a symlink loop,
    a FIFO or device, a name that is not valid UTF-8 (:func:`.folders.file_problem`).

    Raises:
        SourceError: A URL, no such file or folder, no container in it, or a folder that also
            holds other data files (images, audio, arrays): one kind of source per folder.
    """
    path = _local(src, what)
    if not os.path.isdir(path):
        _one_file(src, path)
        return os.path.dirname(path), (os.path.basename(path),)
    found, others = [], []
    for folder, dirs, files in os.walk(path):
        checkpoint()
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in files if not n.startswith(".")):
            rel = os.path.relpath(os.path.join(folder, name), path).replace(os.sep, "/")
            ext = os.path.splitext(name)[1].lower()
            problem = file_problem(path, rel) if ext == suffix else None
            if problem is not None:
                skipped.append((shown(rel), problem))
            elif ext == suffix:
                found.append(rel)
            elif ext in _DATA and ext != suffix:
                others.append(rel)
    if not found:
        left = (
            f" ({len(skipped)} left out, e.g. {skipped[0][0]}: {skipped[0][1]})" if skipped else ""
        )
        raise SourceError(f"{src}: no {suffix} files in this folder or below it{left}")
    if others:
        raise SourceError(
            f"{src}: mixes {what} files ({len(found)}, e.g. {found[0]}) with other data files "
            f"({len(others)}, e.g. {others[0]}): keep one kind of source per folder"
        )
    return path, tuple(sorted(found))


def _level_exts(folder: str, depth: int) -> set[str]:
    """The data extensions of the first folder level (depth first, by name) that holds any."""
    try:
        with os.scandir(folder) as it:
            entries = [e for e in it if not e.name.startswith(".")]
    except OSError:
        return set()
    exts = {os.path.splitext(e.name)[1].lower() for e in entries if not is_folder(e)}
    if exts & _DATA or depth == 0:
        return exts & _DATA
    for sub in sorted(e.path for e in entries if is_folder(e, follow_symlinks=False)):
        found = _level_exts(sub, depth - 1)
        if found:
            return found
    return set()


def holds(src: str, suffix: str) -> bool:
    """Whether ``src`` is a ``suffix`` file, or a local folder of them.

    A folder qualifies when the first level below it (depth first, sub-folders by name, at
    most four deep) that holds data files holds ``suffix`` files: a class-folder tree answers
    at its first class folder, without reading the rest.
    """
    path = src.removeprefix("file://")
    if is_url(path) or not os.path.isdir(path):  # a file of the suffix: even a FIFO (refused)
        return path.lower().endswith(suffix)
    return suffix in _level_exts(path, _PROBE_DEPTH)


def make_fields(
    src: str,
    found: Mapping[str, str],
    options: Mapping[str, Mapping[str, Any]],
    fill: int,
    learned: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[FieldSpec, ...]:
    """The fields ``found`` names (field -> kind), with their options.

    ``options`` by kind (the CLI's ``--mask-classes`` and friends), the image's letterbox
    ``fill``, and ``learned`` options by field that the source declares (a Hugging Face
    ``ClassLabel``'s class count).

    Raises:
        SpecError: Options for a kind the source does not have, or a field whose kind needs an
            option nobody gave (naming the command-line flag).
    """
    unused = sorted(set(options) - set(found.values()))
    if unused:
        raise SpecError(f"{src}: options for field(s) {unused} the source does not have")
    out = []
    for name, kind in found.items():
        opts = {**(learned or {}).get(name, {}), **options.get(kind, {})}
        if "fill" in KINDS[kind].options:
            opts.setdefault("fill", fill)
        try:
            out.append(FieldSpec(name, kind, opts))
        except SpecError as exc:
            raise SpecError(f"{src}: {exc} ({KINDS[kind].hint})") from None
    return tuple(out)


def inferred_fields(
    src: str,
    found: Mapping[str, str],
    options: Mapping[str, Mapping[str, Any]],
    fill: int,
    missing: str,
    learned: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[FieldSpec, ...]:
    """The fields :func:`pick_columns` inferred (``found``: each named as its kind).

    Raises:
        SourceError: No field of a ``file`` kind (an image): ``missing`` says what is not there.
        SpecError: As :func:`make_fields`.
    """
    if not any(KINDS[kind].source == "file" for kind in found):
        raise SourceError(f"{src}: {missing}")
    return make_fields(src, {kind: kind for kind in found}, options, fill, learned)


def _pick(src: str, what: str, kind: str, found: Sequence[str], named: str) -> str | None:
    """The one candidate (the one called ``named`` first), None for none.

    Raises:
        SpecError: Several candidates, none called ``named``: the flag that names one.
    """
    if named in found or len(found) < 2:
        return named if named in found else next(iter(found), None)
    raise SpecError(
        f"{src}: {len(found)} {what}s could be the {kind} ({', '.join(found)}): say which "
        f"with --columns {named}={found[0]}"
    )


def pick_columns(
    src: str,
    what: str,
    present: Sequence[str],
    candidates: Mapping[str, Sequence[str]],
    mapping: Mapping[str, str],
    fields: Sequence[FieldSpec] | None = None,
) -> dict[str, str]:
    """``field -> column`` (or suffix) that each field reads.

    ``candidates`` are the columns each kind claims (``Kind.columns``, ``Kind.suffixes``),
    the kinds in their claims' priority order. Without ``fields`` (inference) one field per
    kind of ``candidates`` whose candidates leave no doubt, named as its kind, in that order;
    ``mapping`` (``--columns``) names fields by kind. With ``fields`` (the spec's) each reads
    the column ``mapping`` gives, else the column of its name in ``present``, else the one
    candidate of its kind.

    Raises:
        SpecError: ``mapping`` names a field that is no kind (inference) or not in ``fields``;
            or a field's column is in doubt.
        SourceError: A field of ``fields`` finds no column.
    """
    wanted = [(k, k) for k in candidates] if fields is None else [(f.name, f.kind) for f in fields]
    unknown = sorted(set(mapping) - {name for name, _ in wanted})
    if unknown:
        known = "kind" if fields is None else "field"
        raise SpecError(
            f"{src}: --columns names {unknown[0]!r}, which is no {known} here (fields by kind: "
            f"{', '.join(candidates)}; for other names give --fields)"
        )
    out = dict(mapping)
    for name, kind in wanted:
        if name in out:
            continue
        if fields is not None and name in present:
            out[name] = name
            continue
        found = [c for c in candidates.get(kind, ()) if c not in out.values()]
        column = _pick(src, what, kind, found, name)
        if column is not None:
            out[name] = column
        elif fields is not None:
            raise SourceError(
                f"{src}: no {what} for field {name!r} (kind {kind}); name it with "
                f"--columns {name}={what.upper()}"
            )
    return {name: out[name] for name, _ in wanted if name in out}  # in field order


@dataclass(frozen=True)
class Row:
    """One sample as a container holds it, before its inline cells are parsed.

    Attributes:
        where: The sample's place for messages (``data.parquet row 17``, ``a.tar: cat/0``).
        key: Its key in the store.
        files: ``(field, locator)`` of each file field (a locator names the container and
            the cell: what a bad cell's error names).
        at: ``(FIELD.at, position)`` of each file field, for the source's reads.
        raw: The raw cell of each inline field (None or absent: missing).
    """

    where: str
    key: str
    files: tuple[tuple[str, str], ...]
    at: tuple[tuple[str, Any], ...]
    raw: Mapping[str, Any]


def _parse(field: FieldSpec, raw: Any) -> Any:
    if raw is None or raw == "":
        raise ValueError(f"no {field.name}")
    return field.spec.parse_inline(raw)


def packed_items(
    src: str,
    fields: Sequence[FieldSpec],
    rows: Sequence[Row],
    on_error: str,
    skipped: list[tuple[str, str]],
    names: Mapping[str, Sequence[str]] | None = None,
) -> tuple[tuple[FieldItem, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """The items of ``rows`` sorted by key, and each label field's class names.

    A row whose inline cell is missing or bad is a per-input error (``on_error``; recorded
    in ``skipped`` under ``skip``). Labels given as names are indexed as in a manifest
    (:func:`precompute.fields.labels.name_classes`: sorted names); ``names`` are the class
    names a container declares for integer labels (kept in their order).

    Raises:
        SourceError: No usable row, a key twice, keypoint counts that differ, or (under
            ``raise``) a bad cell.
    """
    inline = [f for f in fields if f.spec.source == "inline"]
    kept: list[tuple[Row, dict[str, Any]]] = []
    for row in rows:
        try:
            kept.append((row, {f.name: _parse(f, row.raw.get(f.name)) for f in inline}))
        except ValueError as exc:
            per_input(src, on_error, skipped, row.key, f"{row.where}: {exc}")
    if not kept:
        raise SourceError(f"{src}: no usable sample")
    same_counts(src, inline, [(row.where, cells) for row, cells in kept])
    named = name_classes(src, inline, [(row.where, cells) for row, cells in kept])
    declared = tuple((f, tuple(n)) for f, n in (names or {}).items() if f not in dict(named))
    items: dict[str, FieldItem] = {}
    for row, cells in kept:
        if row.key in items:
            raise SourceError(f"{src}: {row.where}: key {row.key!r} is used by another sample")
        values = tuple((f.name, cells[f.name]) for f in inline) + row.at
        items[row.key] = FieldItem(row.key, row.files, values)
    return tuple(items[k] for k in sorted(items)), tuple(sorted(declared + named))


S = TypeVar("S", bound=PackedSource)


def packed_source(
    cls: type[S],
    src: str,
    root: str,
    fields: Sequence[FieldSpec],
    rows: Sequence[Row],
    on_error: str,
    skipped: list[tuple[str, str]],
    containers: tuple[str, ...],
    columns: Mapping[str, str],
    names: Mapping[str, Sequence[str]] | None = None,
) -> S:
    """The listed source of ``rows`` (:func:`packed_items`): what a reader's lister returns.

    Raises:
        SourceError: As :func:`packed_items`.
    """
    items, classes = packed_items(src, fields, rows, on_error, skipped, names)
    return cls(
        root,
        tuple(f.name for f in fields),
        items,
        classes,
        tuple(sorted(skipped)),
        containers=containers,
        columns=tuple(sorted(columns.items())),
    )


def register_packed(
    name: str,
    suffix: str,
    infer: Callable[..., tuple[FieldSpec, ...]],
    lister: Callable[..., PackedSource],
) -> SourceReader:
    """Register a packed format's reader: sources that :func:`hold <holds>` ``suffix`` files.

    ``infer(src, options, fill, columns)`` gives their fields, ``lister(src, fields,
    on_error, columns)`` lists them (the functions of the reader's module).
    """

    def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
        return infer(q.src, q.options, q.fill, q.columns)

    def _lister(q: SourceQuery) -> PackedSource:
        return lister(q.src, q.fields, q.on_error, q.columns)

    return register_source(SourceReader(name, lambda q: holds(q.src, suffix), _infer, _lister))
