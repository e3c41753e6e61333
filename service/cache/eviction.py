"""Removal and LRU eviction under a byte budget, never touching a leased or building store.

One protocol on any cache root (:mod:`service.cache.roots`) and its coordination
(:mod:`service.coord`). Unpublishing a key happens under its build claim (so no build of it
starts meanwhile) and the eviction guard: readers take their lease *before* re-checking the
entry, and the guard is asked again *after* the entry is deleted, so a reader that still saw
the entry is seen, the entry is written back and the store kept. Only then is the store
deleted. Removal fails with :class:`StoreInUseError` when a reader holds a lease; eviction
skips the store, and a key whose build claim is held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.cache.catalog import Entry
from service.cache.roots import CacheRoot
from service.coord.base import Coordinator
from service.errors import StoreInUseError

__all__ = ["GcReport", "collect", "evict_lru", "remove_store", "try_evict"]


@dataclass(frozen=True)
class GcReport:
    """What one garbage collection did.

    Attributes:
        evicted: Keys evicted, least recently used first.
        freed_bytes: Bytes of the evicted stores.
        skipped_leased: Keys over budget that were leased (or building) and kept.
        cleaned: Crash debris removed (paths relative to the cache root).
        total_bytes: Bytes of the stores left.
        budget_bytes: The budget applied (None: no eviction).
    """

    evicted: tuple[str, ...]
    freed_bytes: int
    skipped_leased: tuple[str, ...]
    cleaned: tuple[str, ...]
    total_bytes: int
    budget_bytes: int | None


def _unpublish(root: CacheRoot, coord: Coordinator, entry: Entry) -> bool:
    """Delete ``entry`` and its store unless a reader leases it; we hold the key's claim."""
    with coord.guard(entry.key) as guard:
        if not guard.free():
            return False
        root.delete_entry(entry.key)  # nobody finds it now
        if not guard.still_free():  # a reader leased it before seeing the entry gone
            root.layout.write_entry(entry)
            return False
        root.delete_store(entry.key)
    return True


def remove_store(
    root: CacheRoot, coord: Coordinator, entry: Entry, lock_timeout: float = -1.0
) -> None:
    """Unpublish ``entry`` (waiting for its build claim), unless a reader leases it.

    Raises:
        StoreInUseError: A reader holds a lease on the store.
        LockTimeoutError: The build claim stayed held past ``lock_timeout``.
    """
    what = f"the claim of {entry.key}"
    with coord.wait_claim(entry.key, lock_timeout, what=what):
        if not _unpublish(root, coord, entry):
            raise StoreInUseError(f"store {entry.key} is leased by a reader; close it first")


def try_evict(root: CacheRoot, coord: Coordinator, entry: Entry) -> bool:
    """Unpublish ``entry`` unless it is leased or being built; return whether it was evicted.

    A build claim whose holder is dead is taken over, not counted as a build.
    """
    claim = coord.try_claim(entry.key)
    if claim is None:
        return False
    with claim:
        return _unpublish(root, coord, entry)


def collect(
    root: CacheRoot,
    coord: Coordinator,
    entries: Sequence[Entry],
    budget: int | None,
    keep: Sequence[str] = (),
    lock_timeout: float = -1.0,
) -> GcReport:
    """Clean debris, then evict the least recently used of ``entries`` until under ``budget``.

    Runs under the cache's ``gc`` claim, so two collections never overshoot together.
    """
    with coord.wait_claim("gc", lock_timeout, what="gc"):
        cleaned = root.clean_debris(coord)
        return evict_lru(entries, budget, keep, lambda e: try_evict(root, coord, e), cleaned)


def evict_lru(
    entries: Sequence[Entry],
    budget: int | None,
    keep: Sequence[str],
    evict: Callable[[Entry], bool],
    cleaned: Sequence[str] = (),
) -> GcReport:
    """Evict the least recently used of ``entries`` with ``evict`` until under ``budget``.

    ``evict(entry)`` returns whether it evicted (a leased or building store is skipped); keys
    in ``keep`` are never tried.
    """
    ordered = sorted(entries, key=lambda e: e.last_access)
    total = sum(e.size_bytes for e in ordered)
    evicted: list[str] = []
    skipped: list[str] = []
    freed = 0
    for entry in ordered:
        if budget is None or total - freed <= budget:
            break
        if entry.key in keep:
            continue
        if evict(entry):
            evicted.append(entry.key)
            freed += entry.size_bytes
        else:
            skipped.append(entry.key)
    return GcReport(tuple(evicted), freed, tuple(skipped), tuple(cleaned), total - freed, budget)
