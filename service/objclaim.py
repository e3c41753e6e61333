"""Claims and leases of a cache in object storage: small objects instead of ``flock``.

**Claim** (one builder per key, one garbage collection at a time): a conditional PUT
(``If-None-Match: *``) of ``claims/<name>.json`` holding ``{host, pid, token}``. Whoever
creates it holds the claim; releasing deletes it. A claim whose holder is a dead process on
this host is taken over: the taker first creates ``claims/<name>.json.takeover/<etag>`` with
a conditional PUT, where ``<etag>`` is the dead claim's ETag, so of several processes that saw
the same dead claim exactly one wins, then overwrites the claim with its own. A holder on
another host cannot be checked: its claim stands until it is released or deleted by hand.

**Lease** (a reader uses the store): ``leases/<key>/<id>.json`` holding ``{host, pid}``, PUT
before the reader re-checks that the store is still published, deleted on release. A lease of
a dead process on this host is ignored (and deleted) by eviction; one of another host counts
until it is released or deleted by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from precompute import objstore
from service.errors import ServiceError
from service.objcatalog import ObjectLayout, object_call

__all__ = [
    "Claim",
    "ObjectLease",
    "describe_holder",
    "holder_alive",
    "live_leases",
    "read_holder",
    "try_claim",
    "wait_claim",
]

POLL_S = 0.05


def _me() -> bytes:
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex}
    return json.dumps(doc).encode()


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


class Claim:
    """A held claim; :meth:`release` deletes it (idempotent)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._held = True

    def release(self) -> None:
        """Delete the claim object."""
        if self._held:
            self._held = False
            object_call("release", objstore.delete, self.url)

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def try_claim(url: str) -> Claim | None:
    """Take the claim at ``url`` without waiting (taking over a dead holder's); None if held."""
    me = _me()
    try:
        object_call("claim", objstore.put_bytes, url, me, only_new=True)
        return Claim(url)
    except FileExistsError:
        pass
    found = read_holder(url)
    if found is None or holder_alive(found[0]):
        return None  # released meanwhile (the caller retries) or held by a live process
    tag = found[1].strip('"') or "none"
    try:
        object_call("takeover", objstore.put_bytes, f"{url}.takeover/{tag}", me, only_new=True)
    except FileExistsError:
        return None  # another process took this dead claim over first
    object_call("takeover", objstore.put_bytes, url, me)
    return Claim(url)


def describe_holder(url: str) -> str:
    """Return ``host pid N`` of the claim at ``url``, or ``nobody``."""
    found = read_holder(url)
    if found is None or not isinstance(found[0], dict):
        return "nobody"
    return f"{found[0].get('host', '?')} pid {found[0].get('pid', '?')}"


def wait_claim(url: str, timeout: float) -> Claim:
    """Take the claim at ``url``, waiting up to ``timeout`` seconds (negative: forever).

    Raises:
        ServiceError: Still held after ``timeout`` (the message names the holder).
    """
    deadline = time.monotonic() + timeout
    while (claim := try_claim(url)) is None:
        if timeout >= 0 and time.monotonic() > deadline:
            raise ServiceError(
                f"{url}: still held by {describe_holder(url)} after {timeout:g} s; if that "
                "process is gone, delete the claim object"
            )
        time.sleep(POLL_S)
    return claim


def live_leases(layout: ObjectLayout, key: str) -> list[str]:
    """Return the lease objects of ``key`` held by live readers; delete dead ones of this host."""
    live = []
    for url in sorted(object_call("list", objstore.list_sizes, layout.lease_prefix(key))):
        found = read_holder(url)
        if found is None:
            continue
        if holder_alive(found[0]):
            live.append(url)
        else:
            object_call("delete", objstore.delete, url)
    return live


class ObjectLease:
    """A reader's hold on a store in object storage (a lease object), released by :meth:`release`.

    Attributes:
        key: The cache key of the leased store.
        path: The store (an ``ObjectPath``), valid while the lease is held.
    """

    def __init__(self, key: str, path: Path, layout: ObjectLayout) -> None:
        self.key = key
        self.path = path
        self._mutex = threading.Lock()
        self._url: str | None = f"{layout.lease_prefix(key)}/{uuid.uuid4().hex}.json"
        object_call("lease", objstore.put_bytes, self._url, _me())

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return self._url is not None

    def release(self) -> None:
        """Release the lease: delete its object (idempotent)."""
        with self._mutex:
            url, self._url = self._url, None
        if url is not None:
            object_call("release", objstore.delete, url)

    def __enter__(self) -> ObjectLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(ServiceError, ImportError, AttributeError):
            self.release()  # a forgotten lease; at interpreter exit the store may be gone

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"ObjectLease(key={self.key[:12]}..., path={str(self.path)!r}, {state})"
