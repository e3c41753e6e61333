"""Coordination of a cache on a local (or mounted) filesystem: ``flock``, dropped on death.

A claim ``name`` is an exclusive ``flock`` on ``locks/<name>.lock`` (``filelock``), a lease a
shared ``flock`` on ``leases/<key>.lease`` (:class:`~service.coord.lease.Lease`), the eviction
guard the *exclusive* lease lock taken without waiting (held, it also keeps new leases waiting,
so :meth:`EvictionGuard.still_free` is always true). The kernel drops every one of them when
its holder's descriptor closes, so a claim is never ``dead``: a crashed holder's is ``free``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from filelock import FileLock, Timeout

from service.coord.base import ClaimState
from service.coord.lease import Lease, StoreLease, exclusive_unleased
from service.errors import LockTimeoutError

__all__ = ["FileClaim", "LocalCoordinator"]

T = TypeVar("T")


class FileClaim:
    """A held file lock (a claim of a local cache root)."""

    def __init__(self, lock: FileLock) -> None:
        self._lock = lock
        self.url = lock.lock_file

    def still_mine(self) -> bool:
        """Whether the lock is held (a kernel lock cannot be taken over)."""
        return self._lock.is_locked

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._lock.is_locked:
            self._lock.release(force=True)

    def __enter__(self) -> FileClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Unleased:
    def __init__(self, free: bool) -> None:
        self._free = free

    def free(self) -> bool:
        return self._free

    def still_free(self) -> bool:
        return self._free  # the exclusive lock keeps new leases waiting


class LocalCoordinator:
    """Claims and leases of the cache root folder ``root`` (``locks/``, ``leases/``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def lock_file(self, name: str) -> Path:
        """The lock file of the claim ``name``."""
        return self.root / "locks" / f"{name}.lock"

    def lease_file(self, key: str) -> Path:
        """The lease lock file of ``key``."""
        return self.root / "leases" / f"{key}.lease"

    def wait_claim(
        self, name: str, timeout: float, *, what: str, until: Callable[[], T | None] | None = None
    ) -> FileClaim | T:
        """Take the lock of ``name`` (``until`` is not polled: re-check once it is held)."""
        lock = FileLock(str(self.lock_file(name)), timeout=timeout)
        try:
            lock.acquire()
        except Timeout as exc:
            raise LockTimeoutError(
                f"timed out after {timeout:g} s waiting for {what}: another process holds the "
                f"lock file {self.lock_file(name)}"
            ) from exc
        return FileClaim(lock)

    def try_claim(self, name: str) -> FileClaim | None:
        """Take the lock of ``name`` without waiting; None if another holder has it."""
        lock = FileLock(str(self.lock_file(name)), blocking=False)
        try:
            lock.acquire()
        except Timeout:
            return None
        return FileClaim(lock)

    def claim_state(self, name: str) -> ClaimState:
        """``held`` or ``free`` (a dead holder's lock is free)."""
        claim = self.try_claim(name)
        if claim is None:
            return "held"
        claim.release()
        return "free"

    def lease(self, key: str, path: Path) -> StoreLease:
        """A shared lock on ``leases/<key>.lease``."""
        return Lease(key, path, self.lease_file(key))

    @contextlib.contextmanager
    def guard(self, key: str) -> Iterator[_Unleased]:
        """The exclusive lease lock of ``key``, tried without waiting."""
        with exclusive_unleased(self.lease_file(key)) as free:
            yield _Unleased(free)
