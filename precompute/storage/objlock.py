"""The build lock in object storage: an object created by a conditional PUT, taken over if dead.

``OUT/_nostall/build.lock`` holds ``{host, pid}`` of the build writing ``OUT``. It is created with
``If-None-Match: *``, so of two builds exactly one gets it. The lock of a build that died on this
host is taken over with a PUT conditional on the version judged dead (``If-Match`` its ETag), so
of several builds that find the same dead lock exactly one takes it, and none overwrites a lock
taken meanwhile. The release deletes only this build's own version (``If-Match``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from precompute.errors import BuildLockedError
from precompute.storage.base import ByteStore, VersionChangedError

__all__ = ["object_lock", "pid_alive"]

log = logging.getLogger("precompute.storage.objlock")
_LOCK_TRIES = 5  # looks at a lock that keeps changing under us before giving up


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive_here(holder: Mapping[str, Any]) -> bool:
    """Whether the lock holder is a live process (True when it runs on another host)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return True
    return pid_alive(holder["pid"])


@contextmanager
def object_lock(store: ByteStore, key: str, owner: str) -> Iterator[None]:
    """Hold the lock object ``key`` of ``store`` while within (see the module docstring).

    Raises:
        BuildLockedError: Another live build holds it (the message names its host and pid).
    """
    etag = _take(store, key, owner)
    try:
        yield
    except BaseException:
        _release(store, key, etag, failing=True)  # the build's own error is what is raised
        raise
    _release(store, key, etag, failing=False)


def _release(store: ByteStore, key: str, etag: str, failing: bool) -> None:
    """Delete the lock object; while the build is failing, a failure to delete is logged.

    Raises:
        OSError: The delete failed after a build that succeeded (the lock is left behind).
    """
    try:
        store.delete(key, if_match=etag or None)
    except VersionChangedError:
        log.warning("%s: the build lock was taken over; left to its new holder", store.url(key))
    except OSError as exc:
        if not failing:
            raise
        log.warning("%s: the build lock was not released: %s", store.url(key), exc)


def _take(store: ByteStore, key: str, owner: str) -> str:
    """Create the lock, or take over a dead build's; return its version."""
    me = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode()
    holder: dict[str, Any] = {}
    for _ in range(_LOCK_TRIES):
        try:
            return store.put_if_absent(key, me)
        except FileExistsError:
            pass
        try:
            found = store.get(key)
        except FileNotFoundError:
            continue  # released meanwhile: create it again
        try:
            doc = json.loads(bytes(found.data))
        except ValueError:
            doc = {}
        holder = doc if isinstance(doc, dict) else {}
        if _alive_here(holder):
            break
        try:  # its holder died on this host: take over that version, no other
            return store.put_if_match(key, me, found.version)
        except VersionChangedError:
            continue  # taken over or released meanwhile: look again
    raise BuildLockedError(
        f"{owner}: another build is writing this store (lock {store.url(key)} held by "
        f"{holder.get('host', '?')} pid {holder.get('pid', '?')}); wait for it to "
        "finish, or delete the lock object if that build is gone"
    )
