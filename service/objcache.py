"""``Cache("s3://bucket/prefix")``: the store cache with its root in object storage.

Same guarantees as the local cache, with objects in place of folders, renames and ``flock``:

* **Build once**: a builder holds the claim ``claims/<key>.json`` (a conditional PUT, taken
  over from a dead holder: :mod:`service.objclaim`); others poll for the entry or the claim
  (one wait path, :func:`~service.objclaim.wait_claim`, with a backoff).
  The claim holder re-checks the catalog, builds into ``stores/<key>/`` (resuming or wiping
  what a dead builder left), checks the store like the local cache does, and publishes it by
  PUTting ``catalog/<key>.json`` last, if its claim is still its own (a builder that stalled
  past ``claim_stale_s`` and lost it publishes nothing). A store without an entry is never
  served.
* **LRU and eviction**: a hit PUTs ``access/<key>.json``; :meth:`gc` evicts under the budget,
  never a leased or building store (:mod:`service.objevict`).
* **Leases**: lease objects that beat while held (:class:`~service.objlease.ObjectLease`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.format.layout import MARKER_DIR, StoreInfo, open_store_info
from precompute.storage import objstore
from service import objevict
from service.builders import BuildRequest
from service.cache import Cache
from service.catalog import Entry
from service.errors import BuildFailedError
from service.eviction import GcReport
from service.keys import check_key
from service.objcatalog import ObjectLayout, object_call
from service.objclaim import Claim, wait_claim
from service.objholder import BEAT_S, STALE_S, Timing, inspect_holder
from service.objlease import ObjectLease

__all__ = ["ObjectCache"]


class ObjectCache(Cache):
    """A cache whose root is an ``s3://`` URL (made by ``Cache("s3://...")``; same arguments)."""

    layout: ObjectLayout
    claim_beat_s = BEAT_S  # how often a builder re-PUTs its claim, a reader its lease
    claim_stale_s = STALE_S  # a claim or lease of another host not re-PUT this long is dead

    def _open_layout(self, root: str | Path) -> ObjectLayout:
        layout = ObjectLayout(root)
        layout.ensure()
        return layout

    def _lookup(self, key: str) -> Path | None:
        return self.layout.store(key) if self.layout.touch(key, self.clock()) else None

    def status(self, key: str) -> dict[str, Any]:
        """Return the state of ``key`` (see :meth:`Cache.status`)."""
        entry = self.layout.read_entry(check_key(key))
        if entry is not None:
            return {"key": key, "status": "ready", **entry.to_dict()}
        holder = inspect_holder(self.layout.claim_url(key), self.claim_stale_s)
        if holder is None:
            return {"key": key, "status": "absent"}
        state = "interrupted" if holder.dead else "building"
        return {"key": key, "status": state, "progress": self._progress(key)}

    def _progress(self, key: str) -> dict[str, Any] | None:
        try:
            info = open_store_info(self.layout.store(key), require_complete=False)
        except (StoreError, ValueError, KeyError, TypeError):
            return None
        markers = f"{self.layout.store_url(key)}/{MARKER_DIR}/shards"
        done = sum(u.endswith(".json") for u in object_call("list", objstore.list_sizes, markers))
        total = info.layout.num_shards
        return {"shards_done": done, "shards_total": total, "fraction": done / total}

    # -- building ------------------------------------------------------------------------

    def build(self, request: BuildRequest) -> Path:
        """Build ``request`` unless another caller has (waiting for its build); return the store.

        Raises:
            ServiceError: Another builder still holds the key's claim after ``lock_timeout``.
        """
        key, url = request.key, self.layout.claim_url(request.key)
        got = wait_claim(
            url,
            self.lock_timeout,
            stale_s=self.claim_stale_s,
            beat_s=self.claim_beat_s,
            what=f"the build of {key}",
            until=lambda: self._lookup(key),
        )
        if isinstance(got, Claim):
            with got:
                got = self._lookup(key) or self._build_claimed(request, got)
        if self.budget_bytes is not None:
            self.gc(keep=(request.key,))
        return got

    def _prepare(self, request: BuildRequest) -> bool:
        """Clear what a dead builder left; return whether a complete matching store is there."""
        url = self.layout.store_url(request.key)
        object_call("build", objstore.delete, f"{url}/{MARKER_DIR}/build.lock")  # we hold it
        if not object_call("list", objstore.list_sizes, url):
            return False
        try:
            info = open_store_info(request.out, require_complete=False)
            same = info.spec_hash == request.spec.digest()
            same = same and info.source_fingerprint == request.fingerprint
        except (StoreError, ValueError, KeyError, TypeError):
            same = False
        if not same:
            self.layout.wipe(url)
            return False
        return bool(info.attrs.get("complete"))  # else: the builder resumes it

    def _build_claimed(self, request: BuildRequest, claim: Claim) -> Path:
        """Build under ``claim``; publish the entry only while the claim is still ours.

        Raises:
            BuildFailedError: The builder failed, or the claim was taken over while it ran
                (this process stalled past ``claim_stale_s``): the taker builds and
                publishes the key, and this builder's store is not described by an entry.
        """
        key, store = request.key, self.layout.store(request.key)
        started = time.monotonic()
        if not self._prepare(request):
            self._run_builder(request)
        info = self._check_built(request)
        size = self.layout.store_bytes(key)
        if not claim.still_mine():
            self.stats.inc("build_failures")
            raise BuildFailedError(
                f"build of {key}: its claim {claim.url} was taken over by another builder "
                f"while this one ran (stalled past {self.claim_stale_s:g} s); the entry is "
                "left to that builder"
            )
        return self._publish(request, info, store, size, started)

    def _discard_build(self, request: BuildRequest) -> None:
        self.layout.wipe(self.layout.store_url(request.key))

    def _check_built(self, request: BuildRequest) -> StoreInfo:
        try:
            return super()._check_built(request)
        except BuildFailedError:
            raise
        except OSError as exc:  # a store object could not be read
            self.stats.inc("build_failures")
            raise BuildFailedError(
                f"build of {request.key}: cannot read the store ({exc})"
            ) from exc

    # -- removal, eviction, leases -----------------------------------------------------

    def remove(self, key: str) -> Entry:
        """Remove the store of ``key`` (see :meth:`Cache.remove`)."""
        entry = self.info(key)
        objevict.remove_store(self.layout, entry, self.lock_timeout, self._timing())
        self.stats.inc("removals")
        return entry

    def gc(self, budget_bytes: int | None = None, *, keep: Sequence[str] = ()) -> GcReport:
        """Clean debris, then evict least-recently-used unleased stores over budget."""
        budget = self.budget_bytes if budget_bytes is None else budget_bytes
        report = objevict.collect(
            self.layout, self.list(), budget, keep, self.lock_timeout, self._timing()
        )
        self.stats.inc("evictions", len(report.evicted))
        return report

    def _timing(self) -> Timing:
        return Timing(self.claim_beat_s, self.claim_stale_s)

    def _take_lease(self, key: str, path: Path) -> ObjectLease:
        return ObjectLease(key, path, self.layout, self.claim_beat_s)
