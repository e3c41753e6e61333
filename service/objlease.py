"""Leases of a cache in object storage: a reader's hold on a store is a small object.

``leases/<key>/<id>.json`` holds ``{host, pid, token, beat}``. The reader PUTs it before it
re-checks that the store is still published, re-PUTs it every ``BEAT_S`` seconds while it
reads, and deletes it on release. Eviction and removal (:mod:`service.objevict`) count a lease
as live unless its holder is a dead process on this host, or (another host) the object was last
written more than ``STALE_S`` seconds ago by the object store's own clock (the ``Date`` of the
HEAD response minus the object's ``Last-Modified``, so clock skew between hosts does not
matter); dead leases are deleted.
"""

from __future__ import annotations

import contextlib
import email.utils
import socket
import threading
import uuid
import weakref
from pathlib import Path
from types import TracebackType

from precompute import objstore
from service.errors import ServiceError
from service.objcatalog import ObjectLayout, object_call
from service.objclaim import BEAT_S, STALE_S, Beats, holder_alive, holder_doc, read_holder

__all__ = ["ObjectLease", "lease_age", "live_leases"]


def lease_age(url: str) -> float | None:
    """Return seconds since ``url`` was last written, by the store's clock; None if gone."""
    try:
        response = object_call("lease", objstore.head_object, url)
    except FileNotFoundError:
        return None
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    modified = response.get("LastModified")
    if not date or modified is None:
        return 0.0  # no clock to judge by: counts as fresh
    return float((email.utils.parsedate_to_datetime(date) - modified).total_seconds())


def _live(url: str, stale_s: float) -> bool | None:
    found = read_holder(url)
    if found is None:
        return None
    holder = found[0]
    if not isinstance(holder, dict) or holder.get("host") == socket.gethostname():
        return holder_alive(holder)
    age = lease_age(url)
    return None if age is None else age <= stale_s


def live_leases(layout: ObjectLayout, key: str, stale_s: float = STALE_S) -> list[str]:
    """Return the lease objects of ``key`` held by live readers; delete the dead ones."""
    live = []
    for url in sorted(object_call("list", objstore.list_sizes, layout.lease_prefix(key))):
        state = _live(url, stale_s)
        if state:
            live.append(url)
        elif state is not None:
            object_call("delete", objstore.delete, url)
    return live


class ObjectLease:
    """A reader's hold on a store in object storage (a lease object), released by :meth:`release`.

    Attributes:
        key: The cache key of the leased store.
        path: The store (an ``ObjectPath``), valid while the lease is held.
    """

    def __init__(self, key: str, path: Path, layout: ObjectLayout, beat_s: float = BEAT_S) -> None:
        self.key = key
        self.path = path
        self._mutex = threading.Lock()
        self._token = uuid.uuid4().hex
        self._url: str | None = f"{layout.lease_prefix(key)}/{self._token}.json"
        object_call("lease", objstore.put_bytes, self._url, holder_doc(self._token))
        ref = weakref.ref(self)  # the beats must not keep a forgotten lease alive
        self._beats = Beats(self._url, lambda n: _beat(ref, n), beat_s)

    def _beat(self, n: int) -> bool:
        with self._mutex:
            url = self._url
        if url is not None:
            object_call("lease", objstore.put_bytes, url, holder_doc(self._token, n))
        return url is not None

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return self._url is not None

    def release(self) -> None:
        """Release the lease: stop beating and delete its object (idempotent)."""
        with self._mutex:
            url, self._url = self._url, None
        if url is not None:
            self._beats.stop()
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


def _beat(ref: weakref.ref[ObjectLease], n: int) -> bool:
    lease = ref()
    return lease is not None and lease._beat(n)
