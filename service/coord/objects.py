"""Coordination of a cache in object storage: conditional PUTs, heartbeats, the server's clock.

A claim ``name`` is the object ``claims/<name>.json`` (:mod:`service.coord.objclaim`: taken by
``If-None-Match: *``, re-PUT while held, a dead one taken over exactly once), a lease an object
under ``leases/<key>/`` (:mod:`service.coord.objlease`), and the eviction guard lists the live
leases of a key before and after its entry is deleted (readers PUT their lease before they
re-check the entry). A holder on another host is dead when its object was last written more
than ``stale_s`` ago by the object store's own clock (:mod:`service.coord.objholder`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from precompute.storage.location import Location
from service.coord.base import ClaimState
from service.coord.objclaim import Claim, try_claim, wait_claim
from service.coord.objholder import DEFAULT_TIMING, Timing, inspect_holder
from service.coord.objlease import ObjectLease, live_leases

__all__ = ["ObjectCoordinator"]

T = TypeVar("T")


class _LeaseCheck:
    def __init__(self, prefix: Location, stale_s: float) -> None:
        self._args = (prefix, stale_s)

    def free(self) -> bool:
        return not live_leases(*self._args)

    def still_free(self) -> bool:
        return not live_leases(*self._args)


def _pair(t: Timing) -> tuple[float, float]:
    return t.stale_s, t.beat_s


class ObjectCoordinator:
    """Claims and leases under the cache root ``root`` (``claims/``, ``leases/``).

    Args:
        root: The cache root in object storage.
        timing: How often holders beat, and when one of another host is dead (asked at each
            use: a cache's timing may be changed after it is opened).
    """

    def __init__(
        self, root: Location, timing: Callable[[], Timing] = lambda: DEFAULT_TIMING
    ) -> None:
        self.root = root
        self.timing = timing

    def claim_file(self, name: str) -> Location:
        """The claim object of ``name``."""
        return self.root / "claims" / f"{name}.json"

    def leases(self, key: str) -> Location:
        """The prefix of the lease objects of ``key``."""
        return self.root / "leases" / key

    def wait_claim(
        self, name: str, timeout: float, *, what: str, until: Callable[[], T | None] | None = None
    ) -> Claim | T:
        """Poll for the claim ``name`` (:func:`service.coord.objclaim.wait_claim`)."""
        t = self.timing()
        return wait_claim(
            self.claim_file(name),
            timeout,
            stale_s=t.stale_s,
            beat_s=t.beat_s,
            what=what,
            until=until,
        )

    def try_claim(self, name: str) -> Claim | None:
        """Take the claim ``name`` without waiting (a dead holder's too); None if held."""
        return try_claim(self.claim_file(name), *_pair(self.timing()))

    def claim_state(self, name: str) -> ClaimState:
        """Judge the holder of the claim ``name`` by the object store's clock."""
        holder = inspect_holder(self.claim_file(name), self.timing().stale_s)
        return "free" if holder is None else "dead" if holder.dead else "held"

    def lease(self, key: str, path: Path) -> ObjectLease:
        """A lease object of ``key``, re-PUT while held."""
        return ObjectLease(key, path, self.leases(key), self.timing().beat_s)

    @contextlib.contextmanager
    def guard(self, key: str) -> Iterator[_LeaseCheck]:
        """Lists the live leases of ``key`` (deleting dead ones) when asked."""
        yield _LeaseCheck(self.leases(key), self.timing().stale_s)
