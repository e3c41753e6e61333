"""Removal and LRU eviction under a byte budget, never touching a leased or building store.

Both take the store's lease file *exclusively*: removal fails with :class:`StoreInUseError`
when a reader holds a lease, eviction skips the store. Eviction also skips a key whose build
lock is held. Unpublishing deletes the catalog entry first (nobody finds the store any more),
then moves the store to trash and deletes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from filelock import FileLock

from service import maintenance
from service.catalog import CacheLayout, Entry
from service.errors import StoreInUseError
from service.lease import exclusive_unleased

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


def _unpublish(layout: CacheLayout, key: str) -> None:
    layout.entry_file(key).unlink(missing_ok=True)  # first: nobody finds it any more
    maintenance.discard(layout, layout.store(key))


def remove_store(layout: CacheLayout, key: str, lock_timeout: float = -1.0) -> None:
    """Unpublish ``key`` (waiting for its build lock), unless a reader leases it.

    Raises:
        StoreInUseError: A reader holds a lease on the store.
    """
    with (
        FileLock(str(layout.build_lock(key)), timeout=lock_timeout),
        exclusive_unleased(layout.lease_file(key)) as free,
    ):
        if not free:
            raise StoreInUseError(f"store {key} is leased by a reader; close it first")
        _unpublish(layout, key)


def try_evict(layout: CacheLayout, key: str) -> bool:
    """Unpublish ``key`` unless it is leased or being built; return whether it was evicted."""
    with (
        maintenance.try_lock(layout.build_lock(key)) as unlocked,
        exclusive_unleased(layout.lease_file(key)) as free,
    ):
        if not (unlocked and free):
            return False
        _unpublish(layout, key)
    return True


def collect(
    layout: CacheLayout, entries: Sequence[Entry], budget: int | None, keep: Sequence[str] = ()
) -> GcReport:
    """Clean debris, then evict the least recently used of ``entries`` until under ``budget``.

    Runs under the cache's gc lock, so two collections never overshoot together.
    """
    with FileLock(str(layout.gc_lock)):
        cleaned = maintenance.clean_debris(layout)
        return evict_lru(entries, budget, keep, lambda e: try_evict(layout, e.key), cleaned)


def evict_lru(
    entries: Sequence[Entry],
    budget: int | None,
    keep: Sequence[str],
    evict: Callable[[Entry], bool],
    cleaned: Sequence[str] = (),
) -> GcReport:
    """Evict the least recently used of ``entries`` with ``evict`` until under ``budget``.

    ``evict(entry)`` returns whether it evicted (a leased or building store is skipped); keys
    in ``keep`` are never tried. The one LRU rule of the local and the object-storage cache.
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
