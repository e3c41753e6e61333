"""List an audio dataset for a build: class folders or a ``path,label[,start,end]`` manifest.

An **audio source** is a local folder whose class sub-folders hold audio files (by extension,
:data:`AUDIO_EXTENSIONS`, and no image file; the first file not an array file), or a CSV/JSONL
manifest with a ``path`` column whose first path has an audio extension. Its fields are
``audio`` (kind ``audio``) and ``label`` (class folder index, or the manifest's labels: all
integers, or names sorted).

Each :class:`~precompute.sources.fields.FieldItem` carries the file of field ``audio`` and the
inline ``label``, plus ``audio.segment`` ``[start, end, mode]`` seconds when the clip is not the
whole file: a manifest segment (``mode`` ``center``: centre-crop or pad it) or a window of
``--clips all`` (``mode`` ``window``: the clip starts at ``start``). The build's decoder reads
it (:func:`precompute.audio.kind.decode_audio_field`).

``--clips all`` expands a file into windows **at listing time**: the duration comes from the
file's header (``soundfile.info``; no sample is decoded), windows start at ``0, hop, 2 hop,
...`` (inside a manifest segment: from its start) while they start before the end, so the
sample count, the order and the bytes are fixed before any shard runs (resume and
determinism hold). A file whose header cannot be read is a per-input error there (``raise``:
a :class:`~precompute.errors.SourceError` naming it; ``skip``: recorded). Window keys are
``PATH@START`` (seconds, 3 decimals); the ``audio.start`` companion stores the start.

A manifest may list one file in several rows of other ``start``/``end`` (keyword segments of
one long recording): each is a sample of its own, keyed ``PATH#START-END`` (``0.000-4.000``;
``55.300-end``), its windows ``PATH#START-END@T``. The same file with the same segment twice
is an error naming it; a file listed once keeps its path as its key.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from precompute.audio.clips import segment
from precompute.errors import DecodeError, SourceError, SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.fields.values import parse_label
from precompute.sources.classes import list_class_files
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.folders import (
    ARRAY_ONLY_EXTENSIONS,
    AUDIO_EXTENSIONS,
    ESCAPES,
    IMAGE_EXTENSIONS,
    escapes,
    is_folder,
    same_file,
)
from precompute.sources.inputs import read_input
from precompute.sources.listing import check_policy, checkpoint, per_input
from precompute.sources.manifests import MAX_LABEL, jsonl_objects, read_manifest_text

__all__ = ["AUDIO_EXTENSIONS", "audio_fields", "is_audio_source", "list_audio_source"]

MANIFESTS = (".csv", ".jsonl", ".ndjson")
MAX_WINDOWS = 1 << 20  # windows of one file: more is a forged header or a tiny hop
Skipped = list[tuple[str, str]]


def _ext(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def _folder_files(root: str) -> Iterator[tuple[str, str]]:
    """``(class, key)`` of every non-hidden file under the class folders of ``root``, in order.

    Lazy, for :func:`is_audio_source` to stop at the first image file; the build lists the
    folder with :func:`precompute.sources.folders.walk_classes` (its symlink, FIFO and name rules).
    """
    try:
        with os.scandir(root) as it:
            classes = sorted(e.name for e in it if e.name[0] != "." and is_folder(e))
    except OSError:  # the listing says why
        return
    for cls in classes:
        for dirpath, dirs, files in os.walk(os.path.join(root, cls)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(f for f in files if not f.startswith(".")):
                key = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                yield cls, key


def _manifest_rows(src: str, text: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    text = read_manifest_text(src) if text is None else text
    if not src.lower().endswith(".csv"):
        return jsonl_objects(src, text)
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise SourceError(f"{src}: not CSV ({exc})") from exc
    head = [c.strip().lower() for c in rows[0]] if rows else []
    if "path" not in head:
        return []
    return [(n + 2, dict(zip(head, (c.strip() for c in r), strict=False))) for n, r in
            enumerate(rows[1:])]  # fmt: skip


def is_audio_source(src: str, text: str | None = None) -> bool:
    """Whether ``src`` is a local folder of audio class folders or a manifest of audio paths.

    ``text``: the manifest's text when the caller has read it already (else its first 64 KiB
    are read here).
    """
    path = src.removeprefix("file://")
    if "://" in path:
        return False
    if path.lower().endswith(MANIFESTS):
        return _ext(_first_path(path, text)) in AUDIO_EXTENSIONS
    if not os.path.isdir(path):
        return False
    audio = False
    for _, key in _folder_files(path):  # stops at the first image file
        if _ext(key) in IMAGE_EXTENSIONS:
            return False
        if not audio and _ext(key) in ARRAY_ONLY_EXTENSIONS:
            return False  # the first file decides: an array source (precompute.arrays)
        audio = audio or _ext(key) in AUDIO_EXTENSIONS
    return audio


def _first_path(src: str, text: str | None) -> str:
    """The ``path`` of a local manifest's first row ("" if none), from ``text`` or 64 KiB."""
    if text is not None:
        lines = text.splitlines()
    else:
        try:
            with open(src, "rb") as f:
                head = f.read(1 << 16).decode("utf-8-sig", "replace")
        except OSError:
            return ""
        lines = head.splitlines()[:-1] if len(head) == 1 << 16 else head.splitlines()
    try:
        rows = _manifest_rows(src, "\n".join(lines[:8]) + "\n")
    except SourceError:
        return ""
    return str(rows[0][1].get("path", "")) if rows else ""


def audio_fields(
    src: str, options: Mapping[str, Mapping[str, Any]] | None
) -> tuple[FieldSpec, ...]:
    """The fields of an audio source: ``audio`` with ``options["audio"]`` (flags) + ``label``.

    Raises:
        SpecError: No ``--clip-seconds``, options for another kind, or a bad option.
    """
    other = sorted(set(options or {}) - {"audio"})
    if other:
        raise SpecError(f"{src} is an audio source: options for {other} do not apply")
    opts = dict((options or {}).get("audio", {}))
    if opts.get("clip_seconds") is None:
        raise SpecError(
            f"{src} is an audio source: give --clip-seconds T (the length of every stored "
            "clip, in seconds)"
        )
    try:
        return (FieldSpec("audio", "audio", opts), FieldSpec("label", "label", {}))
    except SpecError as exc:
        raise SpecError(f"{src}: {exc}") from None


def _duration(path: str, key: str) -> tuple[int, int]:
    """Frames and sample rate the header of ``path`` declares (``ValueError`` for a bad one)."""
    import soundfile

    if "://" not in path and os.path.isfile(path) and os.path.getsize(path) == 0:
        raise ValueError("empty file (0 bytes)")  # as the decoder says it (docs/audio.md)
    try:
        info = soundfile.info(path) if "://" not in path else soundfile.info(
            io.BytesIO(read_input(path))
        )  # fmt: skip
    except (RuntimeError, OSError, TypeError) as exc:
        raise ValueError(f"not a readable audio file: {exc}") from None
    if info.samplerate <= 0 or info.frames <= 0:
        raise ValueError(f"declares {info.frames} frames at {info.samplerate} Hz")
    return int(info.frames), int(info.samplerate)


def _windows(
    seconds: float, clip: float, hop: float, lo: float, hi: float | None
) -> list[tuple[float, float]]:
    end = seconds if hi is None else min(hi, seconds)
    starts: list[float] = []
    t = lo
    while t < end and len(starts) < MAX_WINDOWS:
        starts.append(round(t, 6))
        if t + clip >= end - 5e-7:  # reaches the end (sums like 3 * 0.3 + 0.4 fall short)
            break
        t = lo + len(starts) * hop
    return [(s, min(s + clip, end)) for s in starts]


def _segment(row: Mapping[str, Any], name: str) -> float | None:
    raw = row.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {raw!r}")
    return value


def _entries(
    src: str, on_error: str, skipped: Skipped, text: str | None
) -> tuple[str, list[tuple[Any, ...]], tuple[str, ...] | None]:
    """``root``, ``(path, label, start, end)`` of every entry, and the class folders' names.

    Class folders: labels are the folder indices of
    :func:`~precompute.sources.classes.list_class_files` (sorted names, as a v1 source's),
    whatever the names look like; files of another kind beside them are refused. A manifest:
    labels as given, and None.
    """
    src = src.removeprefix("file://")
    if not src.lower().endswith(MANIFESTS):  # the one lister of class folders
        listed = list_class_files(src, KINDS["audio"], on_error)
        skipped.extend(listed.skipped)
        return listed.root, [(k, c, None, None) for k, c in listed.items], listed.classes
    root = os.path.dirname(os.path.abspath(src))
    out = []
    for n, row in _manifest_rows(src, text):
        path, label = str(row.get("path") or ""), row.get("label")
        try:
            if not path or label in (None, ""):
                raise ValueError("needs path and label")
            value = parse_label(label)  # an integer or a class name, as every manifest's
            if isinstance(value, int) and not 0 <= value <= MAX_LABEL:
                raise ValueError(f"label {value} is outside 0..{MAX_LABEL}")
            out.append((path, value, _segment(row, "start"), _segment(row, "end")))
        except ValueError as exc:
            per_input(src, on_error, skipped, path or f"line {n}", f"line {n}: {exc}")
    return root, out, None


def _labels(src: str, entries: list[tuple[Any, ...]]) -> tuple[list[int], tuple[str, ...]]:
    raw = [e[1] for e in entries]  # parsed: integers or class names
    if all(isinstance(r, int) for r in raw):
        return list(raw), ()
    if any(isinstance(r, int) for r in raw):
        raise SourceError(f"{src}: labels mix integers and class names")
    classes = tuple(sorted(set(raw)))
    index = {c: i for i, c in enumerate(classes)}
    return [index[r] for r in raw], classes


def _span(lo: float | None, hi: float | None) -> str:
    """A segment as a key writes it: ``20.500-23.200``; ``0.000-`` start, ``-end`` end."""
    return f"{lo or 0.0:.3f}-" + ("end" if hi is None else f"{hi:.3f}")


def _keys(src: str, root: str, entries: list[tuple[Any, ...]]) -> list[str]:
    """Each entry's key: its path, or ``PATH#START-END`` for a file of several segments.

    One file may be listed once per segment (keyword segments of one long recording); the
    same file with the same segment twice is an error, however its path is written.

    Raises:
        SourceError: A file listed twice with the same segment, or two segments whose keys
            (milliseconds) are the same.
    """
    files = [same_file(root, e[0]) for e in entries]
    seen: dict[tuple[str, Any, Any], tuple[int, str]] = {}  # (file, start, end) -> first row
    for i, (f, e) in enumerate(zip(files, entries, strict=True)):
        j, first = seen.setdefault((f, e[2], e[3]), (i, e[0]))
        if j != i:
            also = "" if first == e[0] else f" (as {first!r})"
            whole = "the whole file" if e[2] is None and e[3] is None else _span(e[2], e[3])
            raise SourceError(
                f"{src}: {e[0]!r} is listed twice{also} with the same segment ({whole}); a "
                "file's several segments are rows of other start/end seconds"
            )
    rows = Counter(files)
    keys = [
        e[0] if rows[f] == 1 else f"{e[0]}#{_span(e[2], e[3])}"
        for f, e in zip(files, entries, strict=True)
    ]
    twice = [k for k, n in Counter(keys).items() if n > 1]
    if twice:
        raise SourceError(
            f"{src}: two segments of one file have the key {twice[0]!r} (start and end to the "
            "millisecond): give segments that differ by a millisecond or more"
        )
    return keys


def _order(item: FieldItem) -> tuple[str, float, str]:
    """Items by path, a file's segments and windows by start time (then key)."""
    seg = dict(item.values).get("audio.segment")
    return item.file("audio"), float(seg[0] or 0.0) if seg else 0.0, item.key


def list_audio_source(
    src: str, fields: Sequence[FieldSpec], on_error: str, text: str | None = None
) -> FieldSource:
    """List the audio source ``src`` for ``fields`` (``audio`` + ``label``).

    ``text``: the manifest's text when the caller has read it already (read here if None).

    Raises:
        SourceError: No audio file, a file listed twice with the same segment, labels mixing
            integers and names, or
            (``on_error: raise``) an unusable line or an unreadable header under
            ``--clips all``, or ``on_error`` is neither ``raise`` nor ``skip``.
        SpecError: ``fields`` are not ``audio`` + ``label``.
    """
    check_policy(on_error)
    names = sorted(f.name for f in fields)
    if names != ["audio", "label"]:
        raise SpecError(f"{src}: an audio source has the fields audio and label; spec: {names}")
    opts = next(f.options for f in fields if f.name == "audio")
    skipped: Skipped = []
    root, entries, folders = _entries(src, on_error, skipped, text)
    kept = []
    for e in entries:
        if escapes(root, e[0]):
            skipped.append((e[0], ESCAPES))
        else:
            kept.append(e)
    if not kept:
        raise SourceError(f"{src}: no audio files ({', '.join(sorted(AUDIO_EXTENSIONS))})")
    keys = _keys(src, root, kept)
    if folders is None:
        labels, classes = _labels(src, kept)
    else:
        labels, classes = [int(e[1]) for e in kept], folders
    items = []
    for key, (path, _, lo, hi), label in zip(keys, kept, labels, strict=True):
        items.extend(_items(src, root, key, path, label, lo, hi, opts, on_error, skipped))
    if not items:  # --clips all: every header unreadable, every segment outside its file
        key, why = min(skipped)
        raise SourceError(
            f"{src}: no audio could be used: all {len(kept)} files were left out while "
            f"listing (e.g. {key}: {why})"
        )
    items.sort(key=_order)
    table = (("label", classes),) if classes else ()
    return FieldSource(root, ("audio", "label"), tuple(items), table, tuple(sorted(skipped)))


def _items(
    src: str,
    root: str,
    key: str,
    path: str,
    label: int,
    lo: float | None,
    hi: float | None,
    opts: Mapping[str, Any],
    on_error: str,
    skipped: Skipped,
) -> list[FieldItem]:
    files, value = (("audio", path),), (("label", label),)
    if opts["clips"] != "all":
        seg = () if lo is None and hi is None else (("audio.segment", [lo, hi, "center"]),)
        return [FieldItem(key, files, value + seg)]
    where = path if "://" in path or os.path.isabs(path) else os.path.join(root, path)
    checkpoint()  # a header read per file: where a stopped listing ends
    try:
        frames, rate = _duration(where, path)
        if lo is not None or hi is not None:  # the rules of a --clips center segment
            segment(frames, rate, lo, hi, path)
    except ValueError as exc:
        per_input(src, on_error, skipped, key, str(exc))
        return []
    except DecodeError as exc:
        per_input(src, on_error, skipped, key, exc.reason)
        return []
    seconds = frames / rate
    clip = float(opts["clip_seconds"])
    hop = float(opts["hop_seconds"] or clip)
    spans = _windows(seconds, clip, hop, lo or 0.0, hi)
    if not spans:
        per_input(src, on_error, skipped, key, f"segment starts after the end ({seconds:.3f} s)")
    return [
        FieldItem(f"{key}@{a:.3f}", files, (*value, ("audio.segment", [a, b, "window"])))
        for a, b in spans
    ]
