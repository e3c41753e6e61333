"""Removal, LRU eviction and debris cleaning of a cache in object storage.

Unpublishing a key happens under its build claim (so no build of it starts meanwhile) and
skips (eviction) or refuses (removal) a key with a live lease. Readers PUT their lease *before*
re-checking the entry, and the evictor lists leases again *after* deleting the entry: a reader
that still saw the entry is then seen, the entry is PUT back and the store kept. Only then are
the store's objects deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

from precompute.storage import objstore
from service.catalog import Entry
from service.errors import StoreInUseError
from service.eviction import GcReport, evict_lru
from service.objcatalog import ObjectLayout, object_call
from service.objclaim import try_claim, wait_claim
from service.objholder import DEFAULT_TIMING, Timing
from service.objlease import live_leases

__all__ = ["clean_debris", "clean_markers", "collect", "remove_store", "try_evict"]


def _unpublish(layout: ObjectLayout, entry: Entry, stale_s: float) -> bool:
    """Delete ``entry`` and its store unless a lease appears; we hold the key's claim."""
    key = entry.key
    if live_leases(layout, key, stale_s):
        return False
    object_call("unpublish", objstore.delete, layout.entry_url(key))  # nobody finds it now
    if live_leases(layout, key, stale_s):  # a reader leased it before seeing the entry gone
        layout.write_entry(entry)
        return False
    object_call("unpublish", objstore.delete, layout.access_url(key))
    layout.wipe(layout.store_url(key))
    return True


def remove_store(
    layout: ObjectLayout, entry: Entry, lock_timeout: float = -1.0, timing: Timing = DEFAULT_TIMING
) -> None:
    """Unpublish ``entry`` (waiting for its build claim), unless a reader leases it.

    Raises:
        StoreInUseError: A reader holds a lease on the store.
        ServiceError: The build claim stayed held past ``lock_timeout``.
    """
    url, what = layout.claim_url(entry.key), f"the claim of {entry.key}"
    with wait_claim(url, lock_timeout, stale_s=timing.stale_s, beat_s=timing.beat_s, what=what):
        if not _unpublish(layout, entry, timing.stale_s):
            raise StoreInUseError(f"store {entry.key} is leased by a reader; close it first")


def try_evict(layout: ObjectLayout, entry: Entry, timing: Timing = DEFAULT_TIMING) -> bool:
    """Unpublish ``entry`` unless it is leased or being built; return whether it was evicted.

    A build claim whose holder is dead (by ``timing``: :func:`service.objclaim.try_claim`) is
    taken over, not counted as a build.
    """
    claim = try_claim(layout.claim_url(entry.key), timing.stale_s, timing.beat_s)
    if claim is None:
        return False
    with claim:
        return _unpublish(layout, entry, timing.stale_s)


def clean_markers(layout: ObjectLayout, stale_s: float) -> list[str]:
    """Delete takeover markers older than ``stale_s`` by the object store's clock.

    A marker (``claims/<key>.json.takeover/<etag>``) only stops a second process that read the
    same dead claim from taking it over as well; once older than ``stale_s`` no such reader is
    still waiting to act on its read (one stalled as long is as dead as a stalled holder).

    Returns:
        The markers removed, relative to the cache root.
    """
    removed, claims = [], f"{layout.url}/claims"
    for url, age in sorted(object_call("list", objstore.list_ages, claims).items()):
        if ".json.takeover/" in url and age > stale_s:
            object_call("delete", objstore.delete, url)
            removed.append(url[len(layout.url) + 1 :])
    return removed


def clean_debris(layout: ObjectLayout, timing: Timing = DEFAULT_TIMING) -> list[str]:
    """Delete stores without an entry whose build claim is free or dead (their builder died).

    Returns:
        The prefixes removed, relative to the cache root.
    """
    removed = []
    published = set(layout.catalog_keys())
    for key in layout.store_keys():
        if key in published:
            continue
        if (claim := try_claim(layout.claim_url(key), timing.stale_s, timing.beat_s)) is None:
            continue
        with claim:
            if layout.read_entry(key) is None:
                layout.wipe(layout.store_url(key))
                removed.append(f"stores/{key}")
    return removed


def collect(
    layout: ObjectLayout,
    entries: Sequence[Entry],
    budget: int | None,
    keep: Sequence[str] = (),
    lock_timeout: float = -1.0,
    timing: Timing = DEFAULT_TIMING,
) -> GcReport:
    """Clean debris, then evict the least recently used of ``entries`` until under ``budget``.

    Runs under the cache's ``gc`` claim, so two collections never overshoot together. Debris
    is old takeover markers (:func:`clean_markers`), then stores nobody published.
    """
    url = layout.claim_url("gc")
    with wait_claim(url, lock_timeout, stale_s=timing.stale_s, beat_s=timing.beat_s, what="gc"):
        cleaned = clean_markers(layout, timing.stale_s) + clean_debris(layout, timing)
        return evict_lru(entries, budget, keep, lambda e: try_evict(layout, e, timing), cleaned)
