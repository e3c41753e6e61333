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

The same protocol runs on a root in object storage (``Cache("s3://bucket/prefix")``): claim,
entry and lease objects in place of locks, a rename and ``flock``. What differs lives below the
cache: the root (:mod:`service.cache.roots`: how a store is built in place or renamed, deleted)
and its coordination (:mod:`service.coord`: claims, leases, the eviction guard).
"""

from __future__ import annotations

import builtins
import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from precompute.errors import ClassListWarning, PrecomputeError
from precompute.format.layout import StoreInfo, open_store_info
from precompute.pipeline.check import class_shift, classes_of, kinship
from precompute.spec import BuildSpec
from precompute.transforms.spec import edited_during
from service.cache import eviction
from service.cache.builders import Builder, BuildRequest, precompute_builder
from service.cache.catalog import CacheLayout, Entry
from service.cache.eviction import GcReport
from service.cache.keys import check_key, parse_spec, resolve_request, resolve_source, store_key
from service.cache.metrics import CacheStats
from service.cache.roots import open_root
from service.coord.base import HeldClaim
from service.coord.lease import StoreLease
from service.coord.objholder import BEAT_S, STALE_S, Timing
from service.errors import BuildFailedError, CacheKeyError, ServiceError

__all__ = ["Cache", "GcReport", "StoreLease", "StoreRef"]

# A store reference: a cache key, or (source, spec).
StoreRef = str | tuple[str | Path, BuildSpec | Mapping[str, Any]]


class Cache:
    """A directory of built stores addressed by :func:`service.cache.keys.store_key`.

    Args:
        root: Cache root folder (created if missing), or an ``s3://bucket/prefix`` URL.
        budget_bytes: Byte budget enforced by :meth:`gc` (after each build too); None: unbounded.
        builder: Callable that builds one :class:`BuildRequest`; defaults to
            ``precompute.job.build`` on Ray.
        fingerprinter: ``source path or URL -> fingerprint`` (the spec is then keyed as
            given); defaults to :func:`service.cache.keys.resolve_request`, the build's own listing,
            which also resolves the spec's fields.
        content_hash: Fingerprint sources by content hash instead of size and mtime.
        lock_timeout: Seconds to wait for another process's build of the same key (-1: forever).
        clock: Unix time now, for the LRU clock (a store's last use) and ``created``; default
            ``time.time`` (tests pass a clock of their own instead of sleeping).

    Attributes:
        claim_beat_s: How often a builder re-PUTs its claim, a reader its lease (object
            storage; a local root's locks are the kernel's).
        claim_stale_s: A claim or lease of another host not re-PUT this long is dead.
    """

    layout: CacheLayout
    claim_beat_s = BEAT_S
    claim_stale_s = STALE_S

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
        self._root = open_root(root)  # a folder, or objects: by the byte store under it
        self.layout = self._root.layout
        self.coord = self._root.coordinator(self._timing)
        self.budget_bytes = budget_bytes
        self.content_hash = content_hash
        self.lock_timeout = lock_timeout
        self.clock = clock
        self.stats = CacheStats()
        self._builder = builder or precompute_builder()
        self._fingerprint = fingerprinter

    def _timing(self) -> Timing:
        return Timing(self.claim_beat_s, self.claim_stale_s)

    @property
    def root(self) -> Path:
        """The cache root."""
        return self.layout.root

    # -- keys and lookups ------------------------------------------------------------------

    def request_for(self, source: str | Path, spec: BuildSpec | Mapping[str, Any]) -> BuildRequest:
        """Parse and fingerprint (source, spec) into the request that would build it."""
        parsed = parse_spec(spec, source)  # kinds' flags set the fields the source has
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
        found: Path | None = self._root.lookup(key, self.clock())
        return found

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
        claim = self.coord.claim_state(key)
        if claim == "held":
            state = "building"
        elif claim == "dead" or self._root.partial(key):
            state = "interrupted"  # a local build's folder, its lock free: its builder died
        else:
            return {"key": key, "status": "absent"}
        return {"key": key, "status": state, "progress": self._root.progress(key)}

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

        Raises:
            LockTimeoutError: Another builder still holds the key's claim after
                ``lock_timeout``.
        """
        key = request.key
        got = self.coord.wait_claim(
            key, self.lock_timeout, what=f"the build of {key}", until=lambda: self._lookup(key)
        )
        if isinstance(got, HeldClaim):
            with got:  # built by whoever held the claim before us, or ours to build
                got = self._lookup(key) or self._build_claimed(request, got)
        if self.budget_bytes is not None:
            self.gc(keep=(request.key,))
        return got

    def _build_claimed(self, request: BuildRequest, claim: HeldClaim) -> Path:
        """Build under ``claim``; publish the entry only while the claim is still ours.

        Raises:
            BuildFailedError: The builder failed, or the claim was taken over while it ran
                (this process stalled past ``claim_stale_s``): the taker builds and
                publishes the key, and this builder's store is not described by an entry.
        """
        started = time.monotonic()
        if not self._root.prepare(request):
            self._run_builder(request)
        info = self._check_built(request)
        if not claim.still_mine():
            self.stats.inc("build_failures")
            raise BuildFailedError(
                f"build of {request.key}: its claim {claim.url} was taken over by another builder "
                f"while this one ran (stalled past {self.claim_stale_s:g} s); the entry is left to "
                "that builder"
            )
        store, size = self._root.place(request)
        self._warn_class_shifts(request, info)
        return self._publish(request, info, store, size, started)

    def _warn_class_shifts(self, request: BuildRequest, info: StoreInfo) -> None:
        """Warn where the store built indexes its classes otherwise than a cached one of its root.

        The stores this cache holds for the same or a sibling source root are compared
        (:mod:`precompute.pipeline.check`): another split's manifest in the same folder
        that lacks a class builds one class fewer, and a name then means another label in each
        store. A store with a fixed class list (the spec's ``classes``) is not compared; one
        that cannot be read is skipped.
        """
        mine = classes_of(info.report)
        if info.spec.classes or not mine:
            return
        for entry in self.list():
            if entry.key == request.key or kinship(str(request.source), entry.source) is None:
                continue
            try:
                other = open_store_info(entry.path)
            except (PrecomputeError, OSError):
                continue
            fix = "the spec's classes: BuildSpec(classes=[...]), or classes in a request's spec"
            text = class_shift(str(request.source), mine, str(entry.path), other.report, fix)
            if text is not None:
                warnings.warn(f"cache {self.root}: {text}", ClassListWarning, stacklevel=4)

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
        except (PrecomputeError, OSError) as exc:  # OSError: a store object could not be read
            self.stats.inc("build_failures")
            raise BuildFailedError(f"build of {request.key} left no complete store: {exc}") from exc
        problems = []
        edited = edited_during(request.spec.transform, info.spec.transform)
        if edited is not None:
            problems.append(edited)
        elif info.spec_hash != request.spec.digest():
            problems.append(f"spec hash {info.spec_hash} != {request.spec.digest()}")
        if info.source_fingerprint != request.fingerprint:
            problems.append(
                "source fingerprint differs (did the source change during the "
                f"build?): {info.source_fingerprint} != {request.fingerprint}"
            )
        if problems:
            self.stats.inc("build_failures")
            self._root.discard_build(request)
            raise BuildFailedError(
                f"build of {request.key} is not what was asked for: " + "; ".join(problems)
            )
        return info

    # -- removal and eviction ----------------------------------------------------------

    def remove(self, key: str) -> Entry:
        """Remove the store of ``key``.

        Raises:
            CacheKeyError: No such store.
            StoreInUseError: A reader holds a lease on it.
        """
        entry = self.info(key)
        eviction.remove_store(self._root, self.coord, entry, self.lock_timeout)
        self.stats.inc("removals")
        return entry

    def gc(self, budget_bytes: int | None = None, *, keep: Sequence[str] = ()) -> GcReport:
        """Clean crash debris, then evict least-recently-used unleased stores over budget.

        Args:
            budget_bytes: Overrides the cache's budget for this call.
            keep: Keys not to evict in this call (e.g. the store just built).
        """
        budget = self.budget_bytes if budget_bytes is None else budget_bytes
        entries = self.list()
        report = eviction.collect(self._root, self.coord, entries, budget, keep, self.lock_timeout)
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
        return self.coord.lease(key, path)

    @contextlib.contextmanager
    def open(self, ref: StoreRef) -> Iterator[Path]:
        """Context manager yielding the store path of ``ref`` with a lease held."""
        with self.lease(ref) as lease:
            yield lease.path
