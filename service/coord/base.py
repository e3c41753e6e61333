"""The coordination interface of a cache: build claims, reader leases, the eviction guard.

What processes sharing one cache root agree on, apart from the bytes (those live behind a
:class:`~precompute.storage.base.ByteStore`):

* **Claims** (named ``<key>`` for a build, ``gc`` for a collection): at most one live holder
  per name. :meth:`Coordinator.wait_claim` waits (ending early when ``until`` returns a value),
  :meth:`Coordinator.try_claim` does not; a claim whose holder died is free again (the kernel
  drops a local ``flock``; a dead object claim is taken over exactly once).
* **Leases**: a reader's hold on a store (:class:`~service.coord.lease.StoreLease`).
* **The eviction guard** (:meth:`Coordinator.guard`): whether any reader leases a store, asked
  before its entry is deleted and again after (:meth:`EvictionGuard.still_free`), so a reader
  that saw the entry just before it went is never evicted under.

Two implementations: :class:`~service.coord.local.LocalCoordinator` (file locks the kernel
releases when a holder dies) and :class:`~service.coord.objects.ObjectCoordinator`
(conditional PUTs, heartbeats, liveness by the object store's clock);
:func:`~service.coord.open_coordinator` picks one from the byte store's capabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal, Protocol, TypeVar, runtime_checkable

from service.coord.lease import StoreLease

__all__ = ["ClaimState", "Coordinator", "EvictionGuard", "HeldClaim"]

T = TypeVar("T")
ClaimState = Literal["free", "held", "dead"]


@runtime_checkable
class HeldClaim(Protocol):
    """A claim this process holds; released on ``with`` exit (idempotent).

    Attributes:
        url: Where the claim lives (the lock file, or the claim object's URL), for messages.
    """

    url: str

    def still_mine(self) -> bool:
        """Whether this process holds it now (an object claim can be taken over)."""

    def release(self) -> None:
        """Let the claim go."""

    def __enter__(self) -> HeldClaim: ...

    def __exit__(self, *exc: object) -> None: ...


class EvictionGuard(Protocol):
    """Held while a store is unpublished: whether any reader leases it."""

    def free(self) -> bool:
        """Whether no reader leases the store (asked before its entry is deleted)."""

    def still_free(self) -> bool:
        """Whether no reader leases it still (asked after the entry is deleted)."""


class Coordinator(Protocol):
    """Claims, leases and the eviction guard of one cache root (see the module docstring)."""

    def wait_claim(
        self, name: str, timeout: float, *, what: str, until: Callable[[], T | None] | None = None
    ) -> HeldClaim | T:
        """Take the claim ``name``, waiting up to ``timeout`` seconds (negative: forever).

        Raises:
            LockTimeoutError: Still held by a live holder after ``timeout`` (the message names
                the lock file or claim object, and the holder where known).
        """

    def try_claim(self, name: str) -> HeldClaim | None:
        """Take the claim ``name`` without waiting (a dead holder's too); None if held."""

    def claim_state(self, name: str) -> ClaimState:
        """``free`` (nobody), ``held`` (a live holder) or ``dead`` (a holder that died)."""

    def lease(self, key: str, path: Path) -> StoreLease:
        """Return a held lease on the store of ``key`` at ``path``."""

    def guard(self, key: str) -> AbstractContextManager[EvictionGuard]:
        """Hold the eviction guard of ``key`` while within."""
