"""The output side of a build, without Ray: lock, output checks, report, summary line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from precompute.errors import BuildLockedError, StoreError, StoreMismatchError
from precompute.format import FIELDS, MARKER_DIR, _read_group_attrs
from precompute.objstore import is_object_url, split_url
from precompute.sources import Source
from precompute.spec import BuildSpec

__all__ = [
    "build_lock",
    "build_report",
    "check_output",
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
        from precompute import remote_writer

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
        from precompute import remote_writer

        return remote_writer.store_bytes(str(out))
    return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())


def remove_partials(root: Path) -> None:
    """Delete temporary files a killed build left behind (we hold the lock: no other writer).

    An object store has none: every object is PUT whole.
    """
    if is_object_url(root):
        return
    for name in FIELDS:
        for tmp in (root / name).rglob("*.partial"):
            tmp.unlink(missing_ok=True)


def check_output(out: str) -> None:
    """Refuse outputs the writer cannot use: URLs other than ``s3://``, existing non-folders."""
    if is_object_url(out):
        split_url(out)  # a StoreError for s3:// without a bucket
        return
    if "://" in out:
        raise StoreError(
            f"{out}: the output must be a local (or mounted shared) folder or an s3:// URL"
        )
    if Path(out).exists() and not Path(out).is_dir():
        raise StoreError(f"{out}: exists and is not a folder")


def existing_complete(out: Path, spec: BuildSpec, fp: str) -> dict[str, Any] | None:
    """Return the attrs of an identical complete store at ``out`` (nothing to do), else None."""
    if not (out / "zarr.json").is_file():
        return None
    attrs = dict(_read_group_attrs(out))
    if not attrs.get("complete"):
        return None
    if attrs.get("spec_hash") != spec.digest() or attrs.get("source_fingerprint") != fp:
        raise StoreMismatchError(
            f"{out}: holds a complete store of another spec or source; choose another --out "
            "or remove it"
        )
    return attrs


def build_report(
    source: Source,
    results: list[dict[str, Any]],
    resumed: int,
    seconds: float,
    shard_seconds: float,
    address: str | None,
) -> dict[str, Any]:
    """Return the build report (``finalize`` adds counts and the shards' skipped inputs)."""
    from precompute import TRANSFORM_VERSION

    made = sum(r["num_valid"] + len(r["skipped"]) for r in results)
    return {
        "builder": "precompute.job",
        "transform_version": TRANSFORM_VERSION,
        "source": source.root,
        "classes": list(source.classes),
        "num_inputs": len(source.items) + len(source.skipped),
        "skipped": [{"key": k, "reason": r} for k, r in source.skipped],
        "shards_built": len(results),
        "shards_resumed": resumed,
        "seconds": round(seconds, 3),
        "shard_seconds": round(shard_seconds, 3),
        "samples_per_s": round(made / shard_seconds, 2) if shard_seconds > 0 else 0.0,
        "bytes_read": sum(r["bytes_read"] for r in results),
        "ray_address": address or "local",
    }


def summary_line(out: Path, attrs: dict[str, Any]) -> str:
    """Return the one summary line printed after a build."""
    rep = attrs["report"]
    return (
        f"built {out}: {rep['num_samples']} samples, {rep['num_valid']} valid, "
        f"{len(rep['skipped'])} skipped, {rep['samples_per_s']:.1f} samples/s, "
        f"{rep['bytes_written'] / 1e6:.1f} MB"
    )
