"""The output side of a build, without Ray: lock, output checks, report, summary line."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from numbers import Integral
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.fields import KINDS, FieldSpec
from precompute.format.layout import MARKER_DIR, _read_group_attrs, foreign_entry
from precompute.notes import report_notes, source_note, summary_lines
from precompute.pipeline.replace import differences, other_store
from precompute.sources.classes import MANIFEST_EXTENSIONS
from precompute.sources.fields import ClassSource
from precompute.spec import BuildSpec
from precompute.storage.location import Location, is_url, location

__all__ = [
    "build_lock",
    "build_report",
    "check_output",
    "complete_attrs",
    "existing_complete",
    "remove_partials",
    "source_name",
    "source_notes",
    "store_bytes",
    "summary_line",
]


@contextmanager
def build_lock(out: str | Path | Location) -> Iterator[None]:
    """Hold ``OUT/_nostall/build.lock`` (non-blocking) for the duration of a build.

    A ``flock`` on a folder, an object created by a conditional PUT in object storage
    (:meth:`~precompute.storage.base.ByteStore.exclusive`).

    Raises:
        BuildLockedError: Another process holds the lock.
    """
    root = location(out)
    lock = root / MARKER_DIR / "build.lock"
    with lock.store.exclusive(lock.key, str(root)):
        yield


def store_bytes(out: str | Path | Location) -> int:
    """Return the bytes of every file (object) under ``out``."""
    return sum(meta.size for meta in location(out).list().values())


def remove_partials(root: str | Path | Location) -> None:
    """Delete the temporary files of writers killed mid-write (we hold the lock).

    A local store writes every file as ``<name>.<uuid>.partial`` and renames it, so a killed
    writer can leave one anywhere in the store (``zarr.<uuid>.partial`` next to a
    ``zarr.json``, ``0.<uuid>.partial`` next to a chunk); older shard markers left ``.*.tmp``.
    An object store has none (every object is PUT whole): its listing finds nothing to delete.
    A killed shard task's progress count (``_nostall/progress/``) goes too.
    """
    where = location(root)
    markers = where.store.join(where.store.join(where.key, MARKER_DIR), "shards")
    progress = where.store.join(where.store.join(where.key, MARKER_DIR), "progress")
    for key in where.list():
        name = key.rsplit("/", 1)[-1]
        stale_marker = key.startswith(markers) and name.startswith(".") and name.endswith(".tmp")
        # a killed task's samples-done count (precompute.format.progress)
        if name.endswith(".partial") or stale_marker or key.startswith(progress + "/"):
            where.store.delete(key)


def check_output(out: str, src: str | None = None) -> None:
    """Refuse outputs the writer cannot use, before anything is written.

    Refused: URLs of no store (see :func:`precompute.storage.location.location`), existing
    non-folders, local folders that hold files and no store (nothing is written there, not
    even the build lock), and (with ``src``) an output that overlaps the source: the output inside a
    source folder or prefix (it would become a class of the next build) or the source (folder,
    prefix or manifest file) inside the output. Local paths are compared after resolving
    symlinks. A manifest's own folder may hold the output: only the manifest file is the source.

    Raises:
        StoreError: The output is unusable; the message names it.
    """
    try:
        where = location(out)
    except StoreError as exc:  # a URL of no store, or without a bucket
        raise StoreError(f"--out {exc}") from None
    if where.local and Path(where.key).exists() and not Path(where.key).is_dir():
        raise StoreError(f"--out {out}: exists and is not a folder (must be a local folder)")
    if src is not None:
        _check_apart(out, src)
    # refused before the build lock writes _nostall/ there (a lock object in object storage is
    # deleted when released: only a local flock file would stay)
    foreign = foreign_entry(where) if where.local else None
    if foreign is not None:
        raise StoreError(
            f"{where}: is not empty (it holds {where / foreign}) and is not a nostall store"
        )


def _check_apart(out: str, src: str) -> None:
    """Refuse an output inside the source, or a source inside the output."""
    is_manifest = src.lower().endswith(MANIFEST_EXTENSIONS)
    inside, holds = _nested(out, src)
    if inside and not is_manifest:
        raise StoreError(
            f"--out {out}: lies inside the source {src}; the store would become part of the "
            "dataset: choose an output folder or prefix outside the source"
        )
    if holds:
        raise StoreError(
            f"--out {out}: holds the source {src}; choose an output folder or prefix that "
            "does not contain the source"
        )


def _nested(out: str, src: str) -> tuple[bool, bool]:
    """Whether ``out`` lies in (or is) ``src``, and whether ``src`` lies in ``out``."""
    if is_url(out) != is_url(src):
        return False, False  # a local output never overlaps an object-store source
    try:
        o, s = location(out), location(src)
    except StoreError:
        return False, False  # a source no store serves (read by fsspec): elsewhere
    if o.store is not s.store:
        return False, False
    if o.local:
        o, s = location(_resolved(o.key)), location(_resolved(s.key))
    sep = "/"
    ok, sk = o.key.rstrip(sep), s.key.rstrip(sep)
    inside = ok == sk or ok.startswith(sk + sep) or (not sk and not s.local)
    holds = sk.startswith(ok + sep) or (not ok and not o.local and bool(sk))
    return inside, holds


def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop on the way
        raise StoreError(f"{path}: cannot resolve the path ({exc})") from exc


def complete_attrs(out: Path | Location) -> dict[str, Any] | None:
    """Return the attrs of the complete store at ``out``; None if none is (or it is partial).

    Raises:
        StoreError: ``out/zarr.json`` exists but is not a nostall store's group metadata.
    """
    if not (out / "zarr.json").is_file():
        return None
    attrs = dict(_read_group_attrs(out))
    return attrs if attrs.get("complete") else None


def existing_complete(out: Path | Location, spec: BuildSpec, fp: str) -> dict[str, Any] | None:
    """Return the attrs of an identical complete store at ``out`` (nothing to do), else None.

    Raises:
        StoreMismatchError: ``out`` holds a complete store of another spec or source (the
            message names each difference: :func:`~precompute.pipeline.replace.differences`).
    """
    attrs = complete_attrs(out)
    if attrs is None:
        return None
    found = differences(attrs, spec, fp)
    if found:
        raise other_store(out, "complete", found)
    return attrs


def source_name(src: str) -> str:
    """How a report names the source ``src``: an absolute path, or the URL as given.

    The file itself for a source that is one file (a manifest, a COCO file, a scene, one
    ``.parquet`` or ``.tar``), whose root (where its relative paths start) is its folder.
    """
    path = src.removeprefix("file://")
    return path.rstrip("/") if is_url(path) else os.path.abspath(path)


def _classes(source: Any) -> dict[str, Any]:
    """v1: ``classes`` and ``num_classes``; v2: ``classes`` by field (names given by name)."""
    if isinstance(source, ClassSource):  # a v1 store's report
        listed = source.as_source()
        return {"classes": list(listed.classes), "num_classes": listed.num_classes}
    return {"classes": {field: list(names) for field, names in source.classes}}


def build_report(
    source: Any,
    results: list[dict[str, Any]],
    resumed: int,
    seconds: float,
    shard_seconds: float,
    address: str | None,
    fields: Sequence[FieldSpec] = (),
    src: str | None = None,
) -> dict[str, Any]:
    """Return the build report (``finalize`` adds counts and the shards' skipped inputs).

    ``source``: a :class:`~precompute.sources.fields.FieldSource` (``classes`` by field; a
    :class:`~precompute.sources.fields.ClassSource`: v1's ``classes`` and ``num_classes``).
    ``fields``: the spec's; one class is noted only for a field of one class per sample.
    ``src``: the source as the build was given it, named in the report as
    :func:`source_name` says (a manifest file, not its folder); None: the listed root.
    """
    from precompute import TRANSFORM_VERSION

    made = sum(r["num_valid"] + len(r["skipped"]) for r in results)
    classes = _classes(source)
    report = {
        "builder": "precompute.job",
        "transform_version": TRANSFORM_VERSION,
        "source": source.root if src is None else source_name(src),
        **classes,
        "num_inputs": len(source.items) + len(source.skipped),
        "skipped": [{"key": k, "reason": r} for k, r in source.skipped],
        "skipped_listing": len(source.skipped),
        "shards_built": len(results),
        "shards_resumed": resumed,
        "seconds": round(seconds, 3),
        "shard_seconds": round(shard_seconds, 3),
        "samples_per_s": round(made / shard_seconds, 2) if shard_seconds > 0 else 0.0,
        "bytes_read": sum(r["bytes_read"] for r in results),
        "ray_address": address or "local",
    }
    notes = source_notes(source, fields)
    if notes:
        report["notes"] = notes
    return report


def source_notes(source: Any, fields: Sequence[FieldSpec] = ()) -> dict[str, Any]:
    """The report's notes about ``source`` as a whole (one class only; classes no input has).

    What a build's report starts its ``notes`` with, and what ``precompute check`` says too.
    ``fields``: the spec's (as :func:`build_report`'s).
    """
    other = {f.name for f in fields if not KINDS[f.kind].class_index}
    return _source_notes(_classes(source)["classes"], source.items, other)


def _source_notes(classes: Any, items: Sequence[Any], unlike: set[str]) -> dict[str, Any]:
    """Notes about the whole source: one class only; classes no input has.

    Classes are class folders, or a label's names. ``unlike``: fields that are not one class
    per sample (a detector's boxes of one class, people, are a detector's usual task), never
    noted.
    """
    by_field = classes if isinstance(classes, dict) else {"label": classes}
    notes = {}
    single = [n[0] for f, n in by_field.items() if len(n) == 1 and f not in unlike]
    if single and items:
        notes["single_class"] = source_note("single_class", len(items), single, of="class")
    empty = [
        name
        for field, names in by_field.items()
        if field not in unlike
        for name in _unused(names, field, items)
    ]
    if empty:
        notes["empty_classes"] = source_note("empty_classes", len(empty), empty, unit="class")
    return notes


def _unused(names: Sequence[str], field: str, items: Sequence[Any]) -> list[str]:
    """The class names of ``field`` that no listed item's label is.

    Labels read at listing only: a source whose labels come with their samples (Parquet's) is
    not checked.
    """
    used = set()
    for item in items:
        for key, value in item.values:
            if key == field and isinstance(value, Integral):
                used.add(int(value))
    if not used:
        return []
    return [name for i, name in enumerate(names) if i not in used]


def summary_line(out: Path | Location, attrs: dict[str, Any]) -> str:
    """Return the summary printed after a build: one line, plus one per build note.

    The notes: the report's, and its inputs kept cut short (``truncated``,
    :func:`precompute.notes.report_notes`).

    ``N samples, V valid, S skipped``: the store's sample slots, those that hold data, and
    those left empty by a skipped input (``N = V + S``). Inputs skipped while listing (an
    escaping symlink, a manifest line with an unusable label) have no slot: counted apart.
    The line ends with the runner that built the store and why (``; in process (about 1.9 s
    of work on 2 CPUs; Ray takes about 5 s to start)``).
    """
    rep = attrs["report"]
    table = attrs.get("fields") or {}
    named = ", ".join(f"{name} {entry['kind']}" for name, entry in table.items())
    fields = f" (fields: {named})" if table else ""
    listed = rep.get("skipped_listing", 0)
    inputs = "1 more input" if listed == 1 else f"{listed} more inputs"
    unlisted = f", {inputs} skipped while listing (no slot)" if listed else ""
    runner = rep.get("runner")  # which ran and why (precompute.pipeline.runner)
    ran = f"; {runner['name']} ({runner['why']})" if isinstance(runner, dict) else ""
    line = (
        f"built {out}{fields}: {rep['num_samples']} samples, {rep['num_valid']} valid, "
        f"{rep['num_samples'] - rep['num_valid']} skipped{unlisted}, "
        f"{rep['samples_per_s']:.1f} samples/s, {rep['bytes_written'] / 1e6:.1f} MB{ran}"
    )
    return "\n".join([line, *summary_lines(report_notes(rep))])  # truncated inputs too
