"""Which source a build reads, and with which fields: v1 (class folders, ``path,label``) or v2.

:func:`infer_fields` says what fields a source has when the spec names none: a segmentation
folder (``SRC/images/`` + ``SRC/masks/``) has ``image`` + ``mask``; a manifest whose columns are
named as field kinds (``image``, ``mask``, ``keypoints``, ``label``, ``labels``, ...; no
``path`` column) has one field per such column; an audio source (class folders of audio
files, a ``path,label[,start,end]`` manifest of them: :mod:`precompute.audio.source`) has
``audio`` + ``label``; anything else is a v1 source (no fields).
Options the source cannot give (the mask's class count) come from ``options`` (the CLI's
``--mask-classes`` and friends), else a :class:`~precompute.errors.SpecError` names them.

:func:`list_build_source` lists the source for a spec and returns the spec with the options a
build learns from the source filled in (keypoint count, label class counts), so the stored
spec, its hash and the ``fields`` table are exact.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

from precompute.arrays.buildsrc import (
    infer_array_fields,
    is_array_fields,
    is_array_source,
    list_array_fields,
)
from precompute.arrays.scenesrc import infer_scene_fields, is_scene_fields, list_scene
from precompute.audio.source import audio_fields, is_audio_source, list_audio_source
from precompute.errors import SourceError, SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.format.layout import StoreLayout
from precompute.kinds.hooks import SourceQuery, SourceReader, source_readers
from precompute.pipeline.fieldwork import backends_of, plan_field_shards
from precompute.pipeline.plan import ShardTask
from precompute.sources.classes import MANIFEST_EXTENSIONS, list_source
from precompute.sources.digests import field_fingerprint
from precompute.sources.fields import (
    SEGMENTATION,
    ClassSource,
    FieldSource,
    list_field_manifest,
    list_segmentation,
)
from precompute.sources.listing import read_kept
from precompute.sources.readers import parquet as _parquet  # noqa: F401 (registers its reader)
from precompute.sources.readers import webdataset as _webdataset  # noqa: F401 (the same)
from precompute.sources.rows import jsonl_rows, read_text
from precompute.spec import BuildSpec

__all__ = [
    "CLI_HINT",
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

SEGMENTATION_FIELDS = ("image", "mask")  # the fields of a segmentation folder
CLI_HINT = "on the command line: --mask-classes N (and --ignore-index, --colormap) or --fields"
# The command-line options of each inferred field, named when its options are refused.
_KIND_HINTS = {
    "mask": CLI_HINT,
    "keypoints": "on the command line: --flip-pairs '[[a, b], ...]' or --fields",
    "audio": (
        "on the command line: --clip-seconds T (and --sample-rate, --clips, --hop-seconds, "
        "--channels, --features) or --fields"
    ),
}
# The manifest text infer_fields read for the CLI, taken by the build's listing of the same
# file (manifest_text, through listing.read_kept).
_KEPT: dict[str, Any] = {}


def _local(src: str) -> str | None:
    src = src.removeprefix("file://")
    return None if "://" in src else src


def is_segmentation(src: str) -> bool:
    """Whether ``src`` is a local folder whose sub-folders are exactly ``images/`` + ``masks/``."""
    path = _local(src)
    if path is None or not os.path.isdir(path):
        return False
    subs = {e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith(".")}
    return subs == set(SEGMENTATION)


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


def _columns(src: str, text: str | None) -> list[str]:
    """The header row of a CSV manifest, or the keys of a JSONL manifest's first object."""
    text = read_text(src) if text is None else text
    if not src.lower().endswith(".csv"):
        docs = jsonl_rows(src, text)
        return [str(k) for k in docs[0][1]] if docs else []
    try:
        rows = (r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r))
        return [c.strip() for c in next(rows, [])]
    except csv.Error as exc:
        raise SourceError(f"{src}: not CSV ({exc})") from exc


def _field_columns(src: str, text: str | None = None) -> list[str]:
    """The columns of a field manifest that name kinds; empty for anything else."""
    if not src.lower().endswith(MANIFEST_EXTENSIONS):
        return []
    cols = _columns(src, text)
    named = [c for c in cols if c in KINDS]
    has_file = any(KINDS[c].source == "file" for c in named)
    return named if "path" not in cols and has_file else []


def manifest_file_columns(src: str) -> list[str]:
    """The file columns (``image``, ``mask``) of a manifest of fields; empty for any other."""
    return [c for c in _field_columns(src) if KINDS[c].source == "file"]


def _field(src: str, name: str, opts: Mapping[str, Any]) -> FieldSpec:
    try:
        return FieldSpec(name, name, opts)
    except SpecError as exc:
        hint = _KIND_HINTS.get(name) or KINDS[name].hint
        raise SpecError(f"{src}: {exc} ({hint})") from None


def _reader(query: SourceQuery) -> SourceReader | None:
    """The first registered source reader that accepts ``query`` (None: the built-in ones)."""
    return next((r for r in source_readers() if r.accepts(query)), None)


def _refuse_options(src: str, options: Mapping[str, Any], text: str | None) -> None:
    """Field options given for a source of plain images: say why, naming what is there.

    Raises:
        SourceError: The source mixes images with another kind of file (its lister's message).
        SpecError: Otherwise: which kind of source the options need.
    """
    list_source(src, "skip", text)  # a folder of images beside recordings: that, named
    if "audio" in options:
        raise SpecError(
            f"{src}: audio options (--clip-seconds and the others) need class folders or a "
            "manifest of audio files (.wav, .flac, .ogg, .mp3, ...); this source lists images"
        )
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
    given = text
    query = SourceQuery(
        src, options or {}, fill=fill,
        read_text=lambda: manifest_text(src, keep_text) if given is None else given,
        columns=columns or {},
    )  # fmt: skip
    reader = _reader(query)
    if reader is not None:
        return reader.infer(query)
    if "position" in (options or {}):  # a scene + ground truth (--labels, --patch)
        return infer_scene_fields(src, options or {})
    text = query.text
    if is_array_source(src, text):  # class folders / manifest of .npy, .npz, .mat (issue 14)
        return infer_array_fields(src, options, text)
    options = dict(options or {})
    if is_audio_source(src, text):  # class folders / a manifest of audio files: audio + label
        return audio_fields(src, options)
    seg = is_segmentation(src)
    names: Sequence[str] = SEGMENTATION_FIELDS if seg else _field_columns(src, text)
    if not names:
        if options:
            _refuse_options(src, options, text)
        return ()
    unused = sorted(set(options) - set(names))
    if unused:
        raise SpecError(f"{src}: options for field(s) {unused} the source does not have")
    base = {name: dict(options.get(name, {})) for name in names}
    for name, opts in base.items():
        if "fill" in KINDS[name].options:  # the image's letterbox fill: the spec's
            opts.setdefault("fill", fill)
    what = f"{src} (a segmentation folder: images/ + masks/)" if seg else src
    return tuple(_field(what, name, opts) for name, opts in base.items())


def learn_fields(fields: Sequence[FieldSpec], source: FieldSource) -> tuple[FieldSpec, ...]:
    """``fields`` with the options each kind learns from the source's inline values."""
    out = []
    for f in fields:
        found = [item.value(f.name) for item in source.items] if f.spec.source == "inline" else []
        learned = f.spec.learn(f.options, found)
        out.append(f.with_options(**learned) if learned else f)
    return tuple(out)


def _list_fields(
    src: str,
    fields: Sequence[FieldSpec],
    on_error: str,
    text: str | None,
    columns: Mapping[str, str] | None = None,
) -> FieldSource:
    query = SourceQuery(
        src, fields=tuple(fields), on_error=on_error, read_text=lambda: text,
        columns=columns or {},
    )  # fmt: skip
    reader = _reader(query)
    if reader is not None:
        return reader.lister(query)
    if is_audio_source(src, text):
        return list_audio_source(src, fields, on_error, text)
    if is_scene_fields(fields):
        return list_scene(src, fields)
    if is_segmentation(src):
        names = sorted(f.name for f in fields)
        if names != sorted(SEGMENTATION_FIELDS):
            raise SpecError(
                f"{src}: a segmentation folder has the fields image and mask; the spec "
                f"names {names}"
            )
        return list_segmentation(src, on_error)
    if is_array_source(src, text) or (is_array_fields(fields) and not _field_columns(src, text)):
        return list_array_fields(src, fields, on_error, text)  # arrays: image (array) + label
    if not src.lower().endswith(MANIFEST_EXTENSIONS):
        raise SourceError(
            f"{src}: a build with fields reads a segmentation folder (images/ + masks/) or "
            "a CSV/JSONL manifest with one column per field"
        )
    return list_field_manifest(src, fields, on_error, text)


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
    scene = is_scene_fields(spec.fields)  # a scene file is not a manifest, whatever its name
    text = None if scene else manifest_text(src)  # read once: here, or by the CLI
    columns = dict(spec.columns)
    fields = spec.fields or infer_fields(src, fill=spec.fill, text=text, columns=columns)
    if not fields:  # class folders or path,label: image + label, a v1 store
        listed = ClassSource.of(list_source(src, spec.on_error, text))
        return _read_columns(src, spec, listed), spec
    backends_of(fields)  # a missing decoder or rule: refused before anything runs
    source = _list_fields(src, fields, spec.on_error, text, columns)
    learned = learn_fields(fields, source)
    return _read_columns(src, spec, source), dataclasses.replace(spec, fields=learned)


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
    """The source fingerprint: a scene's or class folders' own, else every field's files."""
    own = getattr(source, "fingerprint", None)  # a scene's, class folders', a packed source's
    if own is not None:
        return str(own(content_hash))
    return field_fingerprint(source, content_hash)


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
