"""Claims of a cache in object storage: small objects instead of ``flock``.

**Claim** (one builder per key, one garbage collection at a time): a conditional PUT
(``If-None-Match: *``) of ``claims/<name>.json`` holding ``{host, pid, token, beat}``. Whoever
creates it holds the claim, re-PUTs it every ``BEAT_S`` seconds (a new ETag) while it holds it,
and deletes it on release. A claim is dead when its holder is a dead process on this host, or
(a holder on another host) when a waiter has seen its ETag unchanged for ``STALE_S`` seconds of
its own clock (no clock skew matters). A dead claim is taken over: the taker first creates
``claims/<name>.json.takeover/<etag>`` with a conditional PUT, where ``<etag>`` is the dead
claim's ETag, so of several processes that saw the same dead claim exactly one wins, then
overwrites the claim with its own. A holder that checks the claim before each beat and finds
another token stops beating. There is no fencing: a holder stalled for longer than ``STALE_S``
(and then resuming its build) can race the process that took its claim over.

Leases (readers) are objects too: :mod:`service.objlease`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from precompute import objstore
from service.errors import ServiceError
from service.objcatalog import object_call

__all__ = [
    "BEAT_S",
    "STALE_S",
    "Beats",
    "Claim",
    "Watch",
    "describe_holder",
    "holder_alive",
    "holder_doc",
    "read_holder",
    "try_claim",
    "wait_claim",
]

POLL_S = 0.05
BEAT_S = 10.0  # a claim's holder re-PUTs it this often
STALE_S = 120.0  # a claim of another host unchanged this long (as a waiter sees it) is dead
log = logging.getLogger("service.objclaim")


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
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(url: str) -> tuple[Any, str] | None:
    """Return ``(holder document, etag)`` of the claim or lease at ``url``, None if absent."""
    try:
        found = object_call("claim", objstore.get_range, url)
    except FileNotFoundError:
        return None
    try:
        return json.loads(found.data), found.etag
    except ValueError:
        return {}, found.etag


class Watch:
    """What a waiting caller saw of claims held on other hosts, to spot a holder that stopped.

    A live holder re-PUTs its claim every ``BEAT_S`` (a new ETag); a claim whose ETag this
    caller has seen unchanged for ``stale_s`` seconds of its own clock is taken as dead.
    """

    def __init__(self, stale_s: float = STALE_S) -> None:
        self.stale_s = stale_s
        self._seen: dict[str, tuple[str, float]] = {}

    def stale(self, url: str, etag: str) -> bool:
        """Record ``etag`` of ``url``; return whether it has not changed for ``stale_s``."""
        now = time.monotonic()
        seen = self._seen.get(url)
        if seen is None or seen[0] != etag:
            self._seen[url] = (etag, now)
            return False
        return now - seen[1] >= self.stale_s


class Beats:
    """Call ``beat(n)`` every ``beat_s`` seconds in a daemon thread until it returns False.

    A failed beat (a ``ServiceError``) is logged and the next one retries.
    """

    def __init__(self, url: str, beat: Callable[[int], bool], beat_s: float) -> None:
        self.url = url
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
                log.warning("%s: heartbeat failed: %s", self.url, exc)

    def stop(self) -> None:
        """Stop beating (waits for a beat under way, unless called from a beat)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()


class Claim:
    """A held claim, re-PUT every ``beat_s`` seconds; :meth:`release` deletes it (idempotent)."""

    def __init__(self, url: str, body: bytes, beat_s: float = BEAT_S) -> None:
        self.url = url
        self._token = json.loads(body)["token"]
        self._held = True
        self._beats = Beats(url, self._beat, beat_s)

    def _mine(self) -> bool:
        holder = (read_holder(self.url) or (None, ""))[0]
        return isinstance(holder, dict) and holder.get("token") == self._token

    def _beat(self, n: int) -> bool:
        if not self._mine():
            log.warning("%s: the claim was taken over; no longer beating", self.url)
            return False
        object_call("beat", objstore.put_bytes, self.url, holder_doc(self._token, n))
        return True

    def release(self) -> None:
        """Stop beating and delete the claim object, unless another process took it over."""
        if self._held:
            self._held = False
            self._beats.stop()
            if self._mine():
                object_call("release", objstore.delete, self.url)

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _dead(url: str, holder: Any, etag: str, watch: Watch | None) -> bool:
    if not isinstance(holder, dict) or holder.get("host") == socket.gethostname():
        return not holder_alive(holder)
    return watch is not None and watch.stale(url, etag)


def try_claim(url: str, watch: Watch | None = None, beat_s: float = BEAT_S) -> Claim | None:
    """Take the claim at ``url`` without waiting (taking over a dead holder's); None if held.

    Args:
        url: The claim object.
        watch: The caller's record of claims seen so far; with it, a claim of another host
            that stopped beating counts as dead.
        beat_s: How often the returned claim is re-PUT.
    """
    me = holder_doc()
    try:
        object_call("claim", objstore.put_bytes, url, me, only_new=True)
        return Claim(url, me, beat_s)
    except FileExistsError:
        pass
    found = read_holder(url)
    if found is None or not _dead(url, found[0], found[1], watch):
        return None  # released meanwhile (the caller retries) or held by a live process
    tag = found[1].strip('"') or "none"
    try:
        object_call("takeover", objstore.put_bytes, f"{url}.takeover/{tag}", me, only_new=True)
    except FileExistsError:
        return None  # another process took this dead claim over first
    object_call("takeover", objstore.put_bytes, url, me)
    return Claim(url, me, beat_s)


def describe_holder(url: str) -> str:
    """Return ``host pid N`` of the claim at ``url``, or ``nobody``."""
    found = read_holder(url)
    if found is None or not isinstance(found[0], dict):
        return "nobody"
    return f"{found[0].get('host', '?')} pid {found[0].get('pid', '?')}"


def wait_claim(url: str, timeout: float, stale_s: float = STALE_S) -> Claim:
    """Take the claim at ``url``, waiting up to ``timeout`` seconds (negative: forever).

    Raises:
        ServiceError: Still held after ``timeout`` (the message names the holder).
    """
    deadline, watch = time.monotonic() + timeout, Watch(stale_s)
    while (claim := try_claim(url, watch)) is None:
        if timeout >= 0 and time.monotonic() > deadline:
            raise ServiceError(
                f"{url}: still held by {describe_holder(url)} after {timeout:g} s; if that "
                "process is gone, delete the claim object"
            )
        time.sleep(POLL_S)
    return claim
