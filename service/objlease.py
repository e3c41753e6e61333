"""Leases of a cache in object storage: a reader's hold on a store is a small object.

``leases/<key>/<id>.json`` holds ``{host, pid, token, beat}``. The reader PUTs it before it
re-checks that the store is still published, re-PUTs it every ``BEAT_S`` seconds while it
reads, and deletes it on release. Eviction and removal (:mod:`service.objevict`) judge a lease
as a claim is judged (:func:`service.objholder.inspect_holder`): live unless its holder is a
dead process on this host, or (another host) the object was last written more than ``STALE_S``
seconds ago by the object store's own clock; dead leases are deleted.
"""

from __future__ import annotations

import uuid
import weakref
from pathlib import Path

from precompute import objstore
from service.lease import StoreLease
from service.objcatalog import ObjectLayout, object_call
from service.objholder import BEAT_S, STALE_S, Beats, holder_doc, inspect_holder

__all__ = ["ObjectLease", "live_leases"]


def live_leases(layout: ObjectLayout, key: str, stale_s: float = STALE_S) -> list[str]:
    """Return the lease objects of ``key`` held by live readers; delete the dead ones."""
    live = []
    for url in sorted(object_call("list", objstore.list_sizes, layout.lease_prefix(key))):
        holder = inspect_holder(url, stale_s)
        if holder is not None and not holder.dead:
            live.append(url)
        elif holder is not None:
            object_call("delete", objstore.delete, url)
    return live


class ObjectLease(StoreLease):
    """A reader's hold on a store in object storage: a lease object, re-PUT while held.

    ``path`` is an ``ObjectPath``; garbage collection of a forgotten lease deletes its object.
    """

    def __init__(self, key: str, path: Path, layout: ObjectLayout, beat_s: float = BEAT_S) -> None:
        super().__init__(key, path)
        self._token = uuid.uuid4().hex
        self._url = f"{layout.lease_prefix(key)}/{self._token}.json"
        object_call("lease", objstore.put_bytes, self._url, holder_doc(self._token))
        self._acquired()
        ref = weakref.ref(self)  # the beats must not keep a forgotten lease alive
        self._beats = Beats(self._url, lambda n: _beat(ref, n), beat_s)

    def _beat(self, n: int) -> bool:
        if self.held:
            object_call("lease", objstore.put_bytes, self._url, holder_doc(self._token, n))
        return self.held

    def _drop(self) -> None:
        self._beats.stop()  # waits for a beat under way: no PUT after the DELETE
        object_call("release", objstore.delete, self._url)


def _beat(ref: weakref.ref[ObjectLease], n: int) -> bool:
    lease = ref()
    return lease is not None and lease._beat(n)
