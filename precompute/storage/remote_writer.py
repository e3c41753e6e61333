"""Write a store into object storage (``--out s3://...``) with the on-disk write protocol.

Every write goes to a private local folder first and is then PUT as whole objects; a PUT is
atomic (a reader sees no object, or the whole new one), so no partial object is ever visible.
The order is the one of :mod:`precompute.pipeline.writer`:

1. :func:`create_or_resume`: the array ``zarr.json`` objects, then the group's with
   ``complete: false`` (or, resuming, the existing store's header is checked and kept).
2. :func:`write_shard` (each shard task, on any node: no shared filesystem is needed): the
   shard's four data objects, then its marker ``_nostall/shards/NNNNNN.json``. The arrays'
   ``zarr.json`` are read once per process (:func:`_array_meta`), not once per shard.
3. :func:`finalize`: the group's ``zarr.json`` with ``complete: true``, last.

A killed build leaves shards without markers (redone on resume: their objects are replaced
whole) and its lock object; :func:`build_lock` takes over a lock whose holder process on this
host is gone, and otherwise names the holder.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from precompute.errors import BuildLockedError, StoreError
from precompute.format.arrays import ArraySpec
from precompute.format.layout import MARKER_DIR, StoreLayout, shard_marker_path
from precompute.format.storecheck import shard_file
from precompute.spec import BuildSpec
from precompute.storage import objstore

log = logging.getLogger("precompute.storage.remote_writer")

__all__ = ["build_lock", "create_or_resume", "finalize", "pid_alive", "store_bytes", "write_shard"]


def _mirror_meta(url: str, local: Path, sizes: Mapping[str, int]) -> None:
    """Download every ``zarr.json`` and shard marker under ``url`` into ``local``."""
    markers = f"{url}/{MARKER_DIR}/shards/"
    for obj in sizes:
        if obj.endswith("/zarr.json") or obj.startswith(markers):
            dest = local / obj[len(url) + 1 :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(objstore.get_range(obj).data)


def _upload_meta(local: Path, url: str) -> None:
    """PUT the arrays' ``zarr.json``, then the group's."""
    for meta in sorted(local.glob("*/zarr.json")):  # every array the writer created
        objstore.put_bytes(f"{url}/{meta.parent.name}/zarr.json", meta.read_bytes())
    objstore.put_bytes(f"{url}/zarr.json", (local / "zarr.json").read_bytes())


def _listing(url: str) -> dict[str, int]:
    try:
        return objstore.list_sizes(url)
    except OSError as exc:
        raise StoreError(str(exc)) from exc


def create_or_resume(url: str, spec: BuildSpec, layout: StoreLayout, fingerprint: str) -> set[int]:
    """Create a new incomplete store at ``url``, or validate an interrupted one; see writer.

    Raises:
        StoreMismatchError: ``url`` holds a store of another spec, source or layout.
        StoreError: The store is complete already, or ``url`` holds other objects.
    """
    from precompute.pipeline import writer

    url = url.rstrip("/")
    sizes = _listing(url)
    others = [k for k in sizes if not k.startswith(f"{url}/{MARKER_DIR}/")]
    if f"{url}/zarr.json" not in sizes and others:
        raise StoreError(f"{url}: holds objects ({others[0]}) and is not a nostall store")
    with tempfile.TemporaryDirectory(prefix="nostall-meta-") as tmp:
        local = Path(tmp) / "store"
        _mirror_meta(url, local, sizes)
        if f"{url}/zarr.json" not in sizes:  # stale markers without a store: not ours
            for marker in (local / MARKER_DIR / "shards").glob("*.json"):
                objstore.delete(f"{url}/{MARKER_DIR}/shards/{marker.name}")
                marker.unlink()
        done = writer.create_or_resume(local, spec, layout, fingerprint)
        _upload_meta(local, url)
    return done


@functools.lru_cache(maxsize=16)
def _array_meta(url: str, arrays: tuple[ArraySpec, ...]) -> tuple[tuple[str, bytes], ...]:
    """Each array's ``zarr.json`` under ``url``: one GET each per process, store and arrays.

    A build never changes an array's metadata once :func:`create_or_resume` has PUT it, and
    that metadata is a function of the :class:`ArraySpec` alone (part of the key): a store
    rebuilt at ``url`` with other arrays is read afresh.
    """
    return tuple((a.name, objstore.get_range(f"{url}/{a.name}/zarr.json").data) for a in arrays)


def write_shard(url: str, layout: StoreLayout, shard: int, **arrays: Any) -> None:
    """Write ``shard`` locally, PUT its four objects, then its marker (see writer.write_shard)."""
    from precompute.pipeline import writer

    url = url.rstrip("/")
    with tempfile.TemporaryDirectory(prefix="nostall-shard-") as tmp:
        local = Path(tmp)
        for name, meta in _array_meta(url, tuple(layout.arrays.values())):
            (local / name).mkdir()
            (local / name / "zarr.json").write_bytes(meta)
        writer.write_shard(local, layout, shard, **arrays)
        remote = objstore.store_path(url)
        for name in layout.arrays:
            path = shard_file(local, layout, name, shard)
            objstore.put_bytes(str(shard_file(remote, layout, name, shard)), path.read_bytes())
        marker = shard_marker_path(local, shard).read_bytes()
        objstore.put_bytes(str(shard_marker_path(remote, shard)), marker)  # last


def finalize(url: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """Publish the store: its group ``zarr.json`` with ``complete: true``, PUT last.

    Raises:
        StoreError: A shard has no marker (the store stays incomplete).
    """
    from precompute.pipeline import writer

    url = url.rstrip("/")
    with tempfile.TemporaryDirectory(prefix="nostall-meta-") as tmp:
        local = Path(tmp) / "store"
        _mirror_meta(url, local, _listing(url))
        try:
            attrs = writer.finalize(local, report)
        except StoreError as exc:
            raise StoreError(str(exc).replace(str(local), url)) from exc
        objstore.put_bytes(f"{url}/zarr.json", (local / "zarr.json").read_bytes())
    return attrs


def store_bytes(url: str) -> int:
    """Return the bytes of every object under ``url``."""
    return sum(_listing(url.rstrip("/")).values())


def _alive_here(holder: Mapping[str, Any]) -> bool:
    """Whether the lock holder is a live process (True when it runs on another host)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return True
    return pid_alive(holder["pid"])


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LOCK_TRIES = 5  # looks at a lock that keeps changing under us before giving up


@contextmanager
def build_lock(url: str) -> Iterator[None]:
    """Hold the object ``OUT/_nostall/build.lock`` (a conditional PUT) during a build.

    The lock of a build that died on this host is taken over with a PUT conditional on the
    version that was judged dead (``If-Match`` its ETag), so of several builds that find the
    same dead lock exactly one takes it, and none overwrites a lock taken meanwhile. The
    release deletes only this build's own version.

    Raises:
        BuildLockedError: Another live build holds it (the message names its host and pid).
    """
    lock = f"{url.rstrip('/')}/{MARKER_DIR}/build.lock"
    etag = _take_lock(url, lock)
    try:
        yield
    finally:
        try:
            objstore.delete(lock, if_match=etag or None)
        except objstore.VersionChangedError:
            log.warning("%s: the build lock was taken over; left to its new holder", lock)


def _take_lock(url: str, lock: str) -> str:
    """Create the lock, or take over a dead build's; return its ETag."""
    me = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode()
    holder: dict[str, Any] = {}
    for _ in range(_LOCK_TRIES):
        try:
            return objstore.put_bytes(lock, me, only_new=True)
        except FileExistsError:
            pass
        try:
            found = objstore.get_range(lock)
        except FileNotFoundError:
            continue  # released meanwhile: create it again
        try:
            doc = json.loads(found.data)
        except ValueError:
            doc = {}
        holder = doc if isinstance(doc, dict) else {}
        if _alive_here(holder):
            break
        try:  # its holder died on this host: take over that version, no other
            return objstore.put_bytes(lock, me, if_match=found.etag)
        except objstore.VersionChangedError:
            continue  # taken over or released meanwhile: look again
    raise BuildLockedError(
        f"{url}: another build is writing this store (lock {lock} held by "
        f"{holder.get('host', '?')} pid {holder.get('pid', '?')}); wait for it to "
        "finish, or delete the lock object if that build is gone"
    )
