"""Leases of a cache in object storage: a reader's hold on a store is a small object.

``leases/<key>/<id>.json`` holds ``{host, pid, token, beat}``. The reader PUTs it before it
re-checks that the store is still published, re-PUTs it every ``BEAT_S`` seconds while it
reads, and deletes it on release; each re-PUT and the release are fenced on the ETag of the
reader's last write (:func:`service.coord.objholder.fenced_put`), so a lease a collection deleted as
dead is never PUT back by a reader that resumes (on a server that honours ``If-Match``; one that
ignores it takes the PUT), and the lease's ``held`` turns False. Eviction and removal
(:mod:`service.cache.eviction`) judge a lease as a claim is judged
(:func:`service.coord.objholder.inspect_holder`): live unless its holder is a dead process on this
host, or (another host) the object was last written more than ``STALE_S`` seconds ago by the
object store's own clock; dead leases are deleted (only in the version judged: a lease re-PUT
meanwhile is live).
"""

from __future__ import annotations

import logging
import uuid
import weakref
from pathlib import Path

from precompute.storage.location import Location
from service.cache.objcatalog import object_call
from service.coord.lease import StoreLease
from service.coord.objholder import (
    BEAT_S,
    STALE_S,
    Beats,
    fenced_delete,
    fenced_put,
    holder_doc,
    inspect_holder,
)

__all__ = ["ObjectLease", "live_leases"]

log = logging.getLogger("service.coord.objlease")


def live_leases(prefix: Location, stale_s: float = STALE_S) -> list[Location]:
    """Return the lease objects under ``prefix`` held by live readers; delete the dead ones.

    A dead lease is deleted only in the version judged (``If-Match``): one its reader re-PUT
    meanwhile is live.
    """
    live = []
    for key in sorted(object_call("list", prefix.list)):
        where = Location(prefix.store, key)
        holder = inspect_holder(where, stale_s)
        if holder is not None and not (holder.dead and fenced_delete("delete", where, holder.etag)):
            live.append(where)
    return live


class ObjectLease(StoreLease):
    """A reader's hold on a store in object storage: a lease object, re-PUT while held.

    ``path`` is the store's :class:`~precompute.storage.location.Location`; the lease object
    lies under ``prefix``. Garbage collection of a forgotten lease deletes its object.
    """

    def __init__(self, key: str, path: Path, prefix: Location, beat_s: float = BEAT_S) -> None:
        super().__init__(key, path)
        self._token = uuid.uuid4().hex
        self._where = prefix / f"{self._token}.json"
        self._etag: str = object_call("lease", self._where.write_bytes, holder_doc(self._token))
        self._acquired()
        ref = weakref.ref(self)  # the beats must not keep a forgotten lease alive
        self._beats = Beats(self._where, lambda n: _beat(ref, n), beat_s)

    def _beat(self, n: int) -> bool:
        if not self.held:
            return False
        doc = holder_doc(self._token, n)
        etag = fenced_put("lease", self._where, doc, self._token, self._etag)
        if etag is None:  # judged dead and deleted by a collection: never PUT it back
            log.warning(
                "%s: the lease was collected as dead (its reader stalled past stale_s); no "
                "longer held: the store may be evicted under its reader",
                self._where,
            )
            self._lost()
            return False
        self._etag = etag
        return True

    def _drop(self) -> None:
        self._beats.stop()  # waits for a beat under way: no PUT after the DELETE
        fenced_delete("release", self._where, self._etag, self._token)


def _beat(ref: weakref.ref[ObjectLease], n: int) -> bool:
    lease = ref()
    return lease is not None and lease._beat(n)
