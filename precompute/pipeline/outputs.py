"""The output side of a build, without Ray: lock, output checks, report, summary line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from precompute.errors import BuildLockedError, StoreError, StoreMismatchError
from precompute.format.layout import MARKER_DIR, _read_group_attrs
from precompute.notes import source_note, summary_lines
from precompute.sources.classes import MANIFEST_EXTENSIONS
from precompute.sources.fields import ClassSource
from precompute.spec import BuildSpec
from precompute.storage.objstore import is_object_url, split_url

__all__ = [
    "build_lock",
    "build_report",
    "check_output",
    "complete_attrs",
    "existing_complete",
    "remove_partials",
    "store_bytes",
    "summary_line",
]


@contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/_nostall/build.lock`` (non-blocking) for the duration of a build.

    Raises:
        BuildLockedError: Another process holds the lock.
    """
    from filelock import FileLock, Timeout

    if is_object_url(out):  # a conditional PUT of the lock object
        from precompute.storage import remote_writer

        with remote_writer.build_lock(str(out)):
            yield
        return
    lock_path = out / MARKER_DIR / "build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout as exc:
        raise BuildLockedError(
            f"{out}: another build is writing this store (lock {lock_path} is held); wait for "
            "it to finish or choose another --out"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def store_bytes(out: str | Path) -> int:
    """Return the bytes of every file under ``out`` (every object under an ``s3://`` URL)."""
    if is_object_url(out):
        from precompute.storage import remote_writer

        return remote_writer.store_bytes(str(out))
    return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())


def remove_partials(root: Path) -> None:
    """Delete the temporary files of writers killed mid-write (we hold the lock).

    Zarr's local store writes every file as ``<name>.<uuid>.partial`` and renames it, so a
    killed writer can leave one anywhere in the store (``zarr.<uuid>.partial`` next to a
    ``zarr.json``, ``0.<uuid>.partial`` next to a chunk); shard markers leave ``.*.tmp``. An
    object store has none: every object is PUT whole.
    """
    if is_object_url(root):
        return
    for tmp in root.rglob("*.partial"):
        tmp.unlink(missing_ok=True)
    for tmp in (root / MARKER_DIR / "shards").glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def check_output(out: str, src: str | None = None) -> None:
    """Refuse outputs the writer cannot use, before anything is written.

    Refused: URLs other than ``s3://``, existing non-folders, and (with ``src``) an output that
    overlaps the source: the output inside a source folder or prefix (it would become a class
    of the next build) or the source (folder, prefix or manifest file) inside the output. Local
    paths are compared after resolving symlinks. A manifest's own folder may hold the output:
    only the manifest file is the source.

    Raises:
        StoreError: The output is unusable; the message names it.
    """
    if is_object_url(out):
        split_url(out)  # a StoreError for s3:// without a bucket
        if src is not None and is_object_url(src):
            _check_apart_urls(out, src)
        return
    if "://" in out:
        raise StoreError(f"--out {out}: must be a local folder (or a mounted shared one) or s3://")
    if Path(out).exists() and not Path(out).is_dir():
        raise StoreError(f"--out {out}: exists and is not a folder (must be a local folder)")
    if src is not None:
        _check_apart(out, src)


def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop on the way
        raise StoreError(f"{path}: cannot resolve the path ({exc})") from exc


def _check_apart(out: str, src: str) -> None:
    src = src[len("file://") :] if src.startswith("file://") else src
    if "://" in src:
        return  # a remote source cannot overlap a local output
    o, s = _resolved(out), _resolved(src)
    is_manifest = src.lower().endswith(MANIFEST_EXTENSIONS)
    if not is_manifest and (o == s or s in o.parents):
        raise StoreError(
            f"--out {out}: lies inside the source {src}; the store would become part of the "
            "dataset: choose an output folder outside the source"
        )
    if o in s.parents:
        raise StoreError(
            f"--out {out}: holds the source {src}; choose an output folder that does not "
            "contain the source"
        )


def _check_apart_urls(out: str, src: str) -> None:
    o, s = out.rstrip("/") + "/", src.rstrip("/") + "/"
    if src.lower().endswith(MANIFEST_EXTENSIONS):
        s = src  # only the manifest object is the source
    if o.startswith(s):
        raise StoreError(f"--out {out}: lies inside the source {src}; choose another prefix")
    if s.startswith(o):
        raise StoreError(f"--out {out}: holds the source {src}; choose another prefix")


def complete_attrs(out: Path) -> dict[str, Any] | None:
    """Return the attrs of the complete store at ``out``; None if none is (or it is partial).

    Raises:
        StoreError: ``out/zarr.json`` exists but is not a nostall store's group metadata.
    """
    if not (out / "zarr.json").is_file():
        return None
    attrs = dict(_read_group_attrs(out))
    return attrs if attrs.get("complete") else None


def existing_complete(out: Path, spec: BuildSpec, fp: str) -> dict[str, Any] | None:
    """Return the attrs of an identical complete store at ``out`` (nothing to do), else None.

    Raises:
        StoreMismatchError: ``out`` holds a complete store of another spec or source.
    """
    attrs = complete_attrs(out)
    if attrs is None:
        return None
    if attrs.get("spec_hash") != spec.digest() or attrs.get("source_fingerprint") != fp:
        raise StoreMismatchError(
            f"{out}: holds a complete store of another spec or source; choose another --out "
            "or remove it"
        )
    return attrs


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
) -> dict[str, Any]:
    """Return the build report (``finalize`` adds counts and the shards' skipped inputs).

    ``source``: a :class:`~precompute.sources.fields.FieldSource` (``classes`` by field; a
    :class:`~precompute.sources.fields.ClassSource`: v1's ``classes`` and ``num_classes``).
    """
    from precompute import TRANSFORM_VERSION

    made = sum(r["num_valid"] + len(r["skipped"]) for r in results)
    classes = _classes(source)
    report = {
        "builder": "precompute.job",
        "transform_version": TRANSFORM_VERSION,
        "source": source.root,
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
    notes = _source_notes(classes["classes"], len(source.items))
    if notes:
        report["notes"] = notes
    return report


def _source_notes(classes: Any, num_items: int) -> dict[str, Any]:
    """Notes about the whole source: one class only (class folders, or a label's names)."""
    by_field = classes if isinstance(classes, dict) else {"label": classes}
    single = [names[0] for names in by_field.values() if len(names) == 1]
    if single and num_items:
        return {"single_class": source_note("single_class", num_items, single)}
    return {}


def summary_line(out: Path, attrs: dict[str, Any]) -> str:
    """Return the summary printed after a build: one line, plus one per build note.

    ``N samples, V valid, S skipped``: the store's sample slots, those that hold data, and
    those left empty by a skipped input (``N = V + S``). Inputs skipped while listing (an
    escaping symlink, a manifest line with an unusable label) have no slot: counted apart.
    """
    rep = attrs["report"]
    table = attrs.get("fields") or {}
    named = ", ".join(f"{name} {entry['kind']}" for name, entry in table.items())
    fields = f" (fields: {named})" if table else ""
    listed = rep.get("skipped_listing", 0)
    inputs = "1 more input" if listed == 1 else f"{listed} more inputs"
    unlisted = f", {inputs} skipped while listing (no slot)" if listed else ""
    line = (
        f"built {out}{fields}: {rep['num_samples']} samples, {rep['num_valid']} valid, "
        f"{rep['num_samples'] - rep['num_valid']} skipped{unlisted}, "
        f"{rep['samples_per_s']:.1f} samples/s, {rep['bytes_written'] / 1e6:.1f} MB"
    )
    return "\n".join([line, *summary_lines(rep.get("notes", {}))])
