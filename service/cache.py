"""``service.Cache``: ask for (source, spec), get a complete store, build at most once.

Concurrency protocol (processes and threads alike):

* **Build**: one builder per key, under the file lock ``locks/<key>.lock`` (an ``flock``, so the
  OS drops it when a builder dies). Whoever gets the lock re-checks the catalog first: callers
  that waited reuse the store. The build writes into ``building/<key>/``, is checked with
  ``open_store_info`` (complete, same spec hash and source fingerprint), renamed to
  ``stores/<key>/`` in one step, and only then catalogued. A killed build leaves only
  ``building/<key>/``, which is never served; the next build of the key resumes or wipes it.
* **Lease**: readers hold a shared ``flock`` on ``leases/<key>.lease`` (:class:`Lease`).
* **Evict/remove**: exclusive lease lock without waiting (skip leased stores), then delete the
  entry, then move the store to trash.

``Cache("s3://bucket/prefix")`` is a :class:`~service.objcache.ObjectCache`: the same protocol
with claim, entry and lease objects in object storage.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from precompute.errors import PrecomputeError
from precompute.format.layout import StoreInfo, open_store_info
from precompute.spec import BuildSpec
from precompute.storage.location import is_url
from service import eviction, maintenance
from service.builders import Builder, BuildRequest, precompute_builder
from service.catalog import CacheLayout, Entry, dir_size
from service.errors import BuildFailedError, CacheKeyError, ServiceError
from service.eviction import GcReport
from service.keys import check_key, parse_spec, resolve_request, resolve_source, store_key
from service.lease import Lease, StoreLease
from service.metrics import CacheStats

__all__ = ["Cache", "GcReport", "StoreLease", "StoreRef"]

# A store reference: a cache key, or (source, spec).
StoreRef = str | tuple[str | Path, BuildSpec | Mapping[str, Any]]


class Cache:
    """A directory of built stores addressed by :func:`service.keys.store_key`.

    Args:
        root: Cache root folder (created if missing), or an ``s3://bucket/prefix`` URL (an
            :class:`~service.objcache.ObjectCache`).
        budget_bytes: Byte budget enforced by :meth:`gc` (after each build too); None: unbounded.
        builder: Callable that builds one :class:`BuildRequest`; defaults to
            ``precompute.job.build`` on Ray.
        fingerprinter: ``source path or URL -> fingerprint`` (the spec is then keyed as
            given); defaults to :func:`service.keys.resolve_request`, the build's own listing,
            which also resolves the spec's fields.
        content_hash: Fingerprint sources by content hash instead of size and mtime.
        lock_timeout: Seconds to wait for another process's build of the same key (-1: forever).
        clock: Unix time now, for the LRU clock (a store's last use) and ``created``; default
            ``time.time`` (tests pass a clock of their own instead of sleeping).
    """

    def __new__(cls, root: str | Path, *args: Any, **kwargs: Any) -> Cache:
        """Return an :class:`~service.objcache.ObjectCache` for an ``s3://`` root."""
        if cls is Cache and is_url(root):
            from service.objcache import ObjectCache  # lazy: it imports this module

            return super().__new__(ObjectCache)
        return super().__new__(cls)

    def __init__(
        self,
        root: str | Path,
        budget_bytes: int | None = None,
        *,
        builder: Builder | None = None,
        fingerprinter: Callable[[Path | str], str] | None = None,
        content_hash: bool = False,
        lock_timeout: float = -1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if budget_bytes is not None and (isinstance(budget_bytes, bool) or budget_bytes < 0):
            raise ValueError(f"budget_bytes must be a non-negative int or None: {budget_bytes!r}")
        self.layout = self._open_layout(root)
        self.budget_bytes = budget_bytes
        self.content_hash = content_hash
        self.lock_timeout = lock_timeout
        self.clock = clock
        self.stats = CacheStats()
        self._builder = builder or precompute_builder()
        self._fingerprint = fingerprinter

    def _open_layout(self, root: str | Path) -> CacheLayout:
        layout = CacheLayout(root)
        layout.ensure()
        return layout

    @property
    def root(self) -> Path:
        """The cache root."""
        return self.layout.root

    # -- keys and lookups ------------------------------------------------------------------

    def request_for(self, source: str | Path, spec: BuildSpec | Mapping[str, Any]) -> BuildRequest:
        """Parse and fingerprint (source, spec) into the request that would build it."""
        parsed = parse_spec(spec)
        if self._fingerprint is None:
            src, parsed, fp = resolve_request(source, parsed, content_hash=self.content_hash)
        else:
            src = resolve_source(source)
            fp = self._fingerprint(src)
        key = store_key(parsed, fp)
        return BuildRequest(key, src, parsed, self.layout.building(key), fp, self.content_hash)

    def key_for(self, source: str | Path, spec: BuildSpec | Mapping[str, Any]) -> str:
        """Return the cache key of (source, spec)."""
        return self.request_for(source, spec).key

    def _lookup(self, key: str) -> Path | None:
        store = self.layout.store(key)
        if self.layout.touch(key, self.clock()) and store.is_dir():
            return store
        return None

    def get(self, key: str) -> Path | None:
        """Return the store of ``key`` and mark it used, or None if it is not cached."""
        path = self._lookup(check_key(key))
        self.stats.inc("hits" if path is not None else "misses")
        return path

    def info(self, key: str) -> Entry:
        """Return the catalog entry of ``key`` (does not count as a use)."""
        entry = self.layout.read_entry(check_key(key))
        if entry is None:
            raise CacheKeyError(f"no store with key {key} in {self.root}")
        return entry

    def list(self) -> builtins.list[Entry]:
        """Return every catalogued store, most recently used first."""
        found = map(self.layout.read_entry, self.layout.catalog_keys())
        entries = [e for e in found if e is not None]
        return sorted(entries, key=lambda e: e.last_access, reverse=True)

    def total_bytes(self) -> int:
        """Return the bytes of all catalogued stores."""
        return sum(e.size_bytes for e in self.list())

    def status(self, key: str) -> dict[str, Any]:
        """Return the state of ``key`` as a JSON-ready dict.

        ``status`` is ``ready`` (with the entry), ``building`` (with ``progress``),
        ``interrupted`` (a dead build's leftovers, with ``progress``) or ``absent``.
        """
        entry = self.layout.read_entry(check_key(key))
        if entry is not None:
            return {"key": key, "status": "ready", **entry.to_dict()}
        building = self.layout.building(key)
        if not building.exists():
            return {"key": key, "status": "absent"}
        with maintenance.try_lock(self.layout.build_lock(key)) as free:
            state = "interrupted" if free else "building"
        return {"key": key, "status": state, "progress": maintenance.build_progress(building)}

    # -- building ------------------------------------------------------------------------

    def get_or_build(self, source: str | Path, spec: BuildSpec | Mapping[str, Any]) -> Path:
        """Return the complete store of (source, spec), building it if no process has.

        Raises:
            SpecError: ``spec`` is malformed.
            SourceNotAllowedError: ``source`` does not exist.
            PrecomputeError: The build raised (e.g. a bad input with ``on_error: raise``).
            BuildFailedError: The builder failed otherwise or left no matching complete store.
        """
        request = self.request_for(source, spec)
        path = self.get(request.key)  # counts the hit or miss
        return path if path is not None else self.build(request)

    def build(self, request: BuildRequest) -> Path:
        """Build ``request`` unless another caller has (waiting for its build); return the store.

        After a build, :meth:`gc` enforces the budget, never evicting the store just built.
        """
        lock = FileLock(str(self.layout.build_lock(request.key)), timeout=self.lock_timeout)
        with lock:
            path = self._lookup(request.key)  # built by whoever held the lock before us
            if path is None:
                path = self._build_locked(request)
        if self.budget_bytes is not None:
            self.gc(keep=(request.key,))
        return path

    def _build_locked(self, request: BuildRequest) -> Path:
        key, store = request.key, self.layout.store(request.key)
        self.layout.entry_file(key).unlink(missing_ok=True)  # an entry whose store vanished
        if store.exists():  # published by a builder that died before cataloguing it:
            maintenance.discard(self.layout, request.out)  # examine it like a partial build,
            os.replace(store, request.out)  # so a complete, matching one is adopted
        started = time.monotonic()
        state = maintenance.inspect_partial(self.layout, request.out, request)
        if state != "complete":
            self._run_builder(request)
        info = self._check_built(request)
        request.out.rename(store)
        return self._publish(request, info, store, dir_size(store), started)

    def _publish(
        self, request: BuildRequest, info: StoreInfo, store: Path, size: int, started: float
    ) -> Path:
        """Write the entry of a checked store (the publish step), mark it used, count it."""
        seconds = round(time.monotonic() - started, 3)
        entry = Entry.of_build(request, info, store, size, self.clock(), seconds)
        self.layout.write_entry(entry)  # published: an entry means a complete store
        self.layout.touch(request.key, entry.created)  # its first use, on this cache's clock
        self.stats.inc("builds")
        return store

    def _run_builder(self, request: BuildRequest) -> None:
        try:
            self._builder(request)
        except PrecomputeError:
            self.stats.inc("build_failures")
            raise
        except Exception as exc:
            self.stats.inc("build_failures")
            raise BuildFailedError(
                f"build of {request.key} from {request.source} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _check_built(self, request: BuildRequest) -> StoreInfo:
        try:
            info = open_store_info(request.out)
        except PrecomputeError as exc:
            self.stats.inc("build_failures")
            raise BuildFailedError(f"build of {request.key} left no complete store: {exc}") from exc
        problems = []
        if info.spec_hash != request.spec.digest():
            problems.append(f"spec hash {info.spec_hash} != {request.spec.digest()}")
        if info.source_fingerprint != request.fingerprint:
            problems.append(
                "source fingerprint differs (did the source change during the "
                f"build?): {info.source_fingerprint} != {request.fingerprint}"
            )
        if problems:
            self.stats.inc("build_failures")
            self._discard_build(request)
            raise BuildFailedError(
                f"build of {request.key} is not what was asked for: " + "; ".join(problems)
            )
        return info

    def _discard_build(self, request: BuildRequest) -> None:
        maintenance.discard(self.layout, request.out)

    # -- removal and eviction ----------------------------------------------------------

    def remove(self, key: str) -> Entry:
        """Remove the store of ``key``.

        Raises:
            CacheKeyError: No such store.
            StoreInUseError: A reader holds a lease on it.
        """
        entry = self.info(key)
        eviction.remove_store(self.layout, key, self.lock_timeout)
        self.stats.inc("removals")
        return entry

    def gc(self, budget_bytes: int | None = None, *, keep: Sequence[str] = ()) -> GcReport:
        """Clean crash debris, then evict least-recently-used unleased stores over budget.

        Args:
            budget_bytes: Overrides the cache's budget for this call.
            keep: Keys not to evict in this call (e.g. the store just built).
        """
        budget = self.budget_bytes if budget_bytes is None else budget_bytes
        report = eviction.collect(self.layout, self.list(), budget, keep)
        self.stats.inc("evictions", len(report.evicted))
        return report

    # -- leases ----------------------------------------------------------------------------

    def lease(self, ref: StoreRef) -> StoreLease:
        """Return a held lease on the store ``ref`` names (a key, or (source, spec)).

        For (source, spec) the store is built first if needed. The lease keeps the store from
        eviction and removal until released.
        """
        for _ in range(3):
            if isinstance(ref, str):
                key, path = check_key(ref), self.get(ref)
                if path is None:
                    raise CacheKeyError(f"no store with key {ref} in {self.root}")
            else:
                request = self.request_for(*ref)
                key, path = request.key, self.get(request.key) or self.build(request)
            lease = self._take_lease(key, path)
            if self._lookup(key) is not None:  # not evicted between lookup and lease
                return lease
            lease.release()
        raise ServiceError(
            f"store {ref!r} was evicted three times while leasing it; raise the cache budget"
        )

    def _take_lease(self, key: str, path: Path) -> StoreLease:
        return Lease(key, path, self.layout.lease_file(key))

    @contextlib.contextmanager
    def open(self, ref: StoreRef) -> Iterator[Path]:
        """Context manager yielding the store path of ``ref`` with a lease held."""
        with self.lease(ref) as lease:
            yield lease.path
