"""Which source a build reads, and with which fields: v1 (class folders, ``path,label``) or v2.

:func:`infer_fields` says what fields a source has when the spec names none. The kinds' source
readers are asked first, in the order they registered (:mod:`precompute.kinds.hooks`,
``docs/kinds.md``): a segmentation folder (``SRC/images/`` + ``SRC/masks/``: ``image`` +
``mask``), array files, a scene, audio files (``audio`` + ``label``), and any a kind plugin
adds. Then a manifest whose columns are named as field kinds (``image``, ``mask``,
``keypoints``, ``label``, ``labels``, ...; no ``path`` column) has one field per such column
(:mod:`precompute.sources.named`); anything else is a v1 source (no fields). Options the source
cannot give (the mask's class count) come from ``options`` (the field flags, by kind name),
else a :class:`~precompute.errors.SpecError` names them and the flags that give them (the
kind's ``hint``). Nothing here names a kind.

:func:`list_build_source` lists the source for a spec and returns the spec with the options a
build learns from the source filled in (keypoint count, label class counts), so the stored
spec, its hash and the ``fields`` table are exact; a fixed class list (the spec's ``classes``)
indexes the labels (:mod:`precompute.sources.classlist`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.errors import SourceError, SpecError
from precompute.fields import KINDS, FieldSpec, v1_fields
from precompute.format.layout import StoreLayout
from precompute.kinds.hooks import SourceQuery, SourceReader, source_readers
from precompute.pipeline.fieldwork import backends_of, plan_field_shards
from precompute.pipeline.plan import ShardTask
from precompute.sources.classes import MANIFEST_EXTENSIONS, list_source
from precompute.sources.classlist import fix_classes, fixed_fields
from precompute.sources.fields import ClassSource, FieldSource, is_segmentation, list_field_manifest
from precompute.sources.listing import read_kept
from precompute.sources.named import field_columns, named_fields
from precompute.sources.readers import parquet as _parquet  # noqa: F401 (registers its reader)
from precompute.sources.readers import webdataset as _webdataset  # noqa: F401 (the same)
from precompute.sources.rows import read_text
from precompute.spec import BuildSpec
from precompute.splits.manifest import fold_splits, source_splits

__all__ = [
    "infer_fields",
    "is_segmentation",
    "learn_fields",
    "list_build_source",
    "manifest_file_columns",
    "manifest_text",
    "plan_tasks",
    "resolve_build",
    "source_fingerprint",
]

# The manifest text infer_fields read for the CLI, taken by the build's listing of the same
# file (manifest_text, through listing.read_kept).
_KEPT: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """``CLI_HINT``, the mask flags' hint (the old import path of ``precompute.kinds.mask``)."""
    if name == "CLI_HINT":
        return importlib.import_module("precompute.kinds.mask").CLI_HINT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def manifest_text(src: str, keep: bool = False) -> str | None:
    """The text of manifest ``src`` (read once for the whole build); None for a folder.

    With ``keep`` the text is kept (one manifest at most) for the next call: the CLI infers a
    manifest's fields before the build lists it, and the build takes the text the inference
    read instead of reading the file again. What was kept is given out once, for the same
    local file unchanged since (path, size, mtime); any call drops it.

    Raises:
        SourceError: The manifest is missing, unreadable, too large or not UTF-8.
    """
    if not src.lower().endswith(MANIFEST_EXTENSIONS):
        return None
    return read_kept(_KEPT, src, lambda: read_text(src), keep)


def manifest_file_columns(src: str) -> list[str]:
    """The file columns (``image``, ``mask``) of a manifest of fields; empty for any other."""
    return [c for c in field_columns(src) if KINDS[c].source == "file"]


def _reader(query: SourceQuery) -> SourceReader | None:
    """The first registered source reader that accepts ``query`` (None: no kind's source)."""
    return next((r for r in source_readers() if r.accepts(query)), None)


def _refuse_options(src: str, options: Mapping[str, Any], text: str | None) -> None:
    """Field options given for a source of plain images: say why, naming what is there.

    Raises:
        SourceError: The source mixes images with another kind of file (its lister's message).
        SpecError: Otherwise: which kind of source the options need.
    """
    list_source(src, "skip", text)  # a folder of images beside recordings: that, named
    for reader in source_readers():
        if reader.needs and set(reader.kinds) & set(options):
            raise SpecError(f"{src}: {reader.needs}; this source lists images")
    raise SpecError(
        f"{src}: field options ({', '.join(sorted(options))}) need a segmentation "
        "folder (images/ + masks/) or a manifest with field columns"
    )


def infer_fields(
    src: str,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    fill: int = 0,
    text: str | None = None,
    keep_text: bool = False,
    columns: Mapping[str, str] | None = None,
) -> tuple[FieldSpec, ...]:
    """Return the fields of ``src`` when the spec names none (empty: a v1 source).

    Args:
        src: The build's source.
        options: Options by kind name (``{"mask": {"classes": 4}}``), applied to the field of
            that kind.
        fill: The spec's letterbox fill, given to the image field.
        text: The text of a manifest ``src`` when the caller has read it already (else it is
            read here, once).
        keep_text: Keep the text read here for the build's listing of ``src``
            (:func:`manifest_text`): the CLI infers the fields, then builds.
        columns: The spec's ``columns`` (``--columns``), for the readers of sources with
            columns (Parquet, WebDataset: ``docs/sources.md``).

    Raises:
        SpecError: A required option no one gave (the mask's class count), or options given
            for a source that has no fields.
    """
    query = SourceQuery(
        src,
        options or {},
        fill=fill,
        read_text=functools.partial(manifest_text, src, keep_text)
        if text is None
        else lambda: text,
        columns=columns or {},
    )
    reader = _reader(query)
    if reader is not None:
        return reader.infer(query)
    names = field_columns(src, query.text)
    if not names:
        if options and set(options) <= {f.kind for f in v1_fields()}:
            return _profile_fields(src, options, fill)
        if options:
            _refuse_options(src, options, query.text)
        return ()
    return named_fields(src, names, options or {}, fill)


def _profile_fields(
    src: str, options: Mapping[str, Mapping[str, Any]], fill: int
) -> tuple[FieldSpec, ...]:
    """The v1 profile's fields (``image`` + ``label``) with the options given for their kinds.

    Class folders or a ``path,label`` manifest whose image options differ from v1's fixed
    ones (``--channels 1``, ``--bit-depth 16``) are stored as a v2 store of these fields.

    Raises:
        SpecError: A refused option, naming the source and the kind's flags.
    """
    out = []
    for f in v1_fields(fill=fill):
        given = {**f.options, **options.get(f.kind, {})}
        try:
            out.append(FieldSpec(f.name, f.kind, given))
        except SpecError as exc:
            raise SpecError(f"{src}: {exc} ({KINDS[f.kind].hint})") from None
    return tuple(out)


def is_profile_source(src: str, fields: Sequence[FieldSpec], text: str | None) -> bool:
    """Whether ``fields`` are the v1 profile's (by name and kind) over a v1 source.

    Such a source (class folders, ``path,label``) is listed as v1 is, as its ``image`` and
    ``label`` fields (:class:`~precompute.sources.fields.ClassSource`).
    """
    profile = {(f.name, f.kind) for f in v1_fields()}
    if {(f.name, f.kind) for f in fields} != profile:
        return False
    query = SourceQuery(src, read_text=lambda: text)
    return _reader(query) is None and not field_columns(src, text)


def shared_flag_kinds(src: str, kinds: Sequence[str], columns: Mapping[str, str]) -> list[str]:
    """Which of ``kinds`` (those declaring one flag) the flag sets for the source ``src``.

    The kinds of the source reader that accepts ``src`` (an audio folder: ``audio``), else
    those no reader owns (``SourceReader.kinds``): the kinds of class folders, manifests,
    Parquet and WebDataset sources (an image's).
    """
    query = SourceQuery(src, read_text=functools.partial(manifest_text, src, True), columns=columns)
    reader = _reader(query)
    if reader is not None and set(reader.kinds) & set(kinds):
        return [k for k in kinds if k in reader.kinds]
    owned = {k for r in source_readers() for k in r.kinds}
    return [k for k in kinds if k not in owned]


def learn_fields(fields: Sequence[FieldSpec], source: FieldSource) -> tuple[FieldSpec, ...]:
    """``fields`` with the options each kind learns from the source's inline values."""
    out = []
    for f in fields:
        found = [item.value(f.name) for item in source.items] if f.spec.source == "inline" else []
        learned = f.spec.learn(f.options, found)
        out.append(f.with_options(**learned) if learned else f)
    return tuple(out)


def _list_fields(query: SourceQuery) -> FieldSource:
    """The source listed by the reader that accepts it, else as a manifest of fields."""
    reader = _reader(query)
    if reader is not None:
        return reader.lister(query)
    if not query.src.lower().endswith(MANIFEST_EXTENSIONS):
        raise SourceError(
            f"{query.src}: a build with fields reads a segmentation folder (images/ + masks/) "
            "or a CSV/JSONL manifest with one column per field"
        )
    return list_field_manifest(query.src, query.fields, query.on_error, query.text)


def list_build_source(src: str, spec: BuildSpec) -> tuple[FieldSource, BuildSpec]:
    """List ``src`` for ``spec``; return the source and the spec with its fields resolved.

    A spec without fields builds a v1 store (a :class:`ClassSource` of image + label),
    unless the source has fields (a segmentation folder or a field manifest): then they are
    inferred (:func:`infer_fields`). A manifest is
    read once and its text handed to every detector and lister; the text the CLI's
    :func:`infer_fields` kept is used instead of a second read (:func:`manifest_text`).

    Raises:
        SpecError: The source needs an option the spec does not give, or a field's decoder
            or build rule is not registered.
        SourceError: The source cannot be listed.
    """
    text = functools.cache(lambda: manifest_text(src))  # read once (or by the CLI), if asked
    columns = dict(spec.columns)
    if spec.transform is not None:  # its code as it is now, never a stale fingerprint
        spec = dataclasses.replace(spec, transform=spec.transform.current())
    fields = spec.fields or infer_fields(src, fill=spec.fill, text=text(), columns=columns)
    if not fields:  # class folders or path,label: image + label, a v1 store
        listed = ClassSource.of(list_source(src, spec.on_error, text()))
        fixed = fix_classes(src, listed, v1_fields(), spec.classes, spec.on_error)
        return _with_splits(src, text(), _read_columns(src, spec, fixed)), spec
    backends_of(fields)  # a missing decoder or rule: refused before anything runs
    if is_profile_source(src, fields, text()):  # image + label of other options: v2
        listed = ClassSource.of(list_source(src, spec.on_error, text()))
        fixed = fix_classes(src, listed, fields, spec.classes, spec.on_error)
        names = spec.classes or next((n for _, n in fixed.classes), ())  # every folder's class
        learned = learn_fields(fixed_fields(fields, names), fixed)
        found = _with_splits(src, text(), _read_columns(src, spec, fixed))
        return found, dataclasses.replace(spec, fields=learned)
    query = SourceQuery(
        src, fields=tuple(fields), on_error=spec.on_error, read_text=text, columns=columns
    )
    source = fix_classes(src, _list_fields(query), fields, spec.classes, spec.on_error)
    learned = learn_fields(fixed_fields(fields, spec.classes), source)
    found = _with_splits(src, text(), _read_columns(src, spec, source))
    return found, dataclasses.replace(spec, fields=learned)


def _with_splits(src: str, text: str | None, source: FieldSource) -> FieldSource:
    """``source`` with each item's part when it is a manifest with a ``split`` column."""
    if text is None:
        return source
    splits = source_splits(src, text, [item.key for item in source.items])
    return dataclasses.replace(source, splits=splits) if splits else source


def _read_columns(src: str, spec: BuildSpec, source: FieldSource) -> FieldSource:
    """``source``, unless the spec names columns that it has none of (a folder, a manifest).

    Raises:
        SpecError: ``columns`` given for a source whose reader reads no columns.
    """
    if spec.columns and not getattr(source, "columns", ()):
        raise SpecError(
            f"{src}: columns (--columns) name the columns of a Parquet or WebDataset source; "
            "this source has none (docs/sources.md)"
        )
    return source


def source_fingerprint(source: FieldSource, content_hash: bool = False) -> str:
    """The source fingerprint (``FieldSource.fingerprint``: a scene's, class folders' own).

    A manifest's ``split`` column is part of it (:func:`precompute.splits.manifest.fold_splits`).
    """
    return fold_splits(source.fingerprint(content_hash), source.splits)


def plan_tasks(
    source: FieldSource, layout: StoreLayout, seed: int, shards: list[int]
) -> list[ShardTask]:
    """The shard tasks of ``shards``."""
    return plan_field_shards(source, layout, seed, shards)


def resolve_build(
    src: str, spec: BuildSpec, content_hash: bool = False
) -> tuple[FieldSource, BuildSpec, str]:
    """The source, the resolved spec and the source fingerprint a build of ``spec`` uses.

    What :func:`precompute.job.build` computes before it writes anything: a caller that keys
    stores by ``(spec_hash, source_fingerprint)`` (the cache service) gets the same values
    from here.
    """
    source, resolved = list_build_source(src, spec)
    return source, resolved, source_fingerprint(source, content_hash)
