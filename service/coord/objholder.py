"""Holders of claims and leases in object storage: their documents, heartbeats and liveness.

A claim (:mod:`service.coord.objclaim`) or a lease (:mod:`service.coord.objlease`) is a small
JSON object ``{host, pid, token, beat}`` that its holder re-PUTs every ``BEAT_S`` seconds while
it holds it. Whoever finds one judges it the same way (:func:`inspect_holder`): it is **dead**
when its holder is a dead process on this host, or, for a holder on another host, when the
object was last written more than ``stale_s`` seconds ago *by the object store's own clock*
(the ``Date`` of the GET response that read it minus the object's ``Last-Modified``). No
caller's clock is consulted, so a caller whose clock is skewed, or one that has just arrived,
judges a holder exactly as every other caller does.

A holder's writes are fenced (:func:`fenced_put`, :func:`fenced_delete`): each beat replaces,
and the release deletes, only the version of the holder's own last write (``If-Match`` on its
ETag), so a holder whose object another process replaced or deleted meanwhile (a takeover, a
collection of a lease judged dead) gets a precondition failure instead of overwriting it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from precompute.storage.base import Blob, VersionChangedError
from precompute.storage.location import Location
from precompute.storage.objlock import pid_alive
from service.cache.objcatalog import object_call
from service.errors import ServiceError

__all__ = [
    "BEAT_S",
    "DEFAULT_TIMING",
    "STALE_S",
    "Beats",
    "Holder",
    "Timing",
    "describe_holder",
    "fenced_delete",
    "fenced_put",
    "holder_alive",
    "holder_doc",
    "inspect_holder",
    "read_holder",
]

BEAT_S = 10.0  # a holder re-PUTs its claim or lease this often
STALE_S = 120.0  # a holder of another host that has not re-PUT for this long is dead
log = logging.getLogger("service.coord.objholder")


@dataclass(frozen=True)
class Timing:
    """How often holders re-PUT their claims and leases, and when one of another host is dead.

    Attributes:
        beat_s: A holder re-PUTs its object this often.
        stale_s: A holder of another host whose object is older than this is dead.
    """

    beat_s: float = BEAT_S
    stale_s: float = STALE_S


DEFAULT_TIMING = Timing()


def holder_doc(token: str | None = None, beat: int = 0) -> bytes:
    """Return the JSON ``{host, pid, token, beat}`` of this process (a new token if None)."""
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "token": token or uuid.uuid4().hex}
    return json.dumps({**doc, "beat": beat}).encode()


def holder_alive(holder: Any) -> bool:
    """Whether a recorded ``{host, pid}`` is a live process (True on another host)."""
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return False  # unreadable: nobody can prove it is held
    if holder.get("host") != socket.gethostname():
        return True
    return pid_alive(holder["pid"])


def _read(where: Location) -> Blob | None:
    """The whole object at ``where``, dated by the store's clock; None if there is none."""
    try:
        found: Blob = object_call("claim", where.store.get_dated, where.key)
    except FileNotFoundError:
        return None
    return found


def _doc(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return {}


def read_holder(where: Location) -> tuple[Any, str] | None:
    """Return ``(holder document, etag)`` of the claim or lease at ``where``, None if absent."""
    found = _read(where)
    return None if found is None else (_doc(found.data), found.version)


@dataclass(frozen=True)
class Holder:
    """What a claim or lease object says, and whether its holder is dead.

    Attributes:
        doc: The holder document (``{}`` when unreadable).
        etag: The ETag of the object version read.
        dead: The holder is a dead process of this host, the document is unreadable, or (a
            holder of another host) that version was written over ``stale_s`` ago.
    """

    doc: Any
    etag: str
    dead: bool


def inspect_holder(where: Location, stale_s: float = STALE_S) -> Holder | None:
    """Read the claim or lease at ``where`` and judge its holder; None if there is none.

    One GET (:meth:`~precompute.storage.base.ByteStore.get_dated`): its own ``Date`` and
    ``Last-Modified`` give the age of the version read.
    """
    found = _read(where)
    if found is None:
        return None
    doc = _doc(found.data)
    if not isinstance(doc, dict) or doc.get("host") == socket.gethostname():
        return Holder(doc, found.version, not holder_alive(doc))
    return Holder(doc, found.version, (found.age_s or 0.0) > stale_s)


def fenced_put(what: str, where: Location, body: bytes, token: str, etag: str) -> str | None:
    """PUT ``body`` over the version ``etag`` of ``where``; return the new ETag, None if lost.

    A precondition failure means another process wrote or deleted the object since (a takeover,
    a collection): the holder has lost it. If the object there still carries ``token``, the
    failed PUT was a retry of this holder's own PUT that had landed, and its ETag is returned.
    """
    try:
        new: str = object_call(what, where.store.put_if_match, where.key, body, etag)
    except VersionChangedError:
        found = read_holder(where)
        mine = found is not None and isinstance(found[0], dict) and found[0].get("token") == token
        return found[1] if found is not None and mine else None
    return new


def fenced_delete(what: str, where: Location, etag: str, token: str | None = None) -> bool:
    """Delete the version ``etag`` of ``where``; False if another holder's version replaced it.

    True also when the object is gone already (deleted by this holder's retried DELETE, or by a
    collection that judged it dead). With ``token`` (the holder's own), a version that still
    carries it is this holder's too (a beat whose PUT landed although the call failed) and is
    deleted.
    """
    try:
        object_call(what, where.store.delete, where.key, if_match=etag)
    except VersionChangedError:
        found = read_holder(where) if token is not None else None
        if found is None or not (isinstance(found[0], dict) and found[0].get("token") == token):
            return found is None and token is not None  # gone meanwhile: nothing left to delete
        return fenced_delete(what, where, found[1])
    return True


def describe_holder(where: Location) -> str:
    """Return ``host pid N`` of the claim at ``where``, or ``nobody``."""
    found = read_holder(where)
    if found is None or not isinstance(found[0], dict):
        return "nobody"
    return f"{found[0].get('host', '?')} pid {found[0].get('pid', '?')}"


class Beats:
    """Call ``beat(n)`` every ``beat_s`` seconds in a daemon thread until it returns False.

    A failed beat (a ``ServiceError``) is logged and the next one retries.

    Args:
        where: The object beaten, for messages.
        beat: Called with the beat's number; False ends the beats.
        beat_s: Seconds between beats.
    """

    def __init__(self, where: Location, beat: Callable[[int], bool], beat_s: float) -> None:
        self.where = where
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(beat, beat_s), daemon=True, name="nostall-beats"
        )
        self._thread.start()

    def _run(self, beat: Callable[[int], bool], beat_s: float) -> None:
        n = 0
        while not self._stop.wait(beat_s):
            n += 1
            try:
                if not beat(n):
                    return
            except ServiceError as exc:
                log.warning("%s: heartbeat failed: %s", self.where, exc)

    def stop(self) -> None:
        """Stop beating (waits for a beat under way, unless called from a beat)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
