"""Leases: a store that a reader holds open is never evicted or removed.

A lease is a *shared* ``flock`` on ``leases/<key>.lease``, held for as long as the reader uses
the store. The kernel drops it when the holder's file descriptor closes, so a crashed reader
never pins a store forever. Eviction and removal take the *exclusive* lock without blocking;
when that fails, somebody holds a lease and the store is skipped.

Lease files are never unlinked: unlinking a lock file while others wait on it would split them
across two inodes and break mutual exclusion.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

__all__ = ["Lease", "exclusive_unleased"]


def _open_lock_file(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


class Lease:
    """A shared lock on one store, released by :meth:`release`, ``with`` exit or process death.

    Attributes:
        key: The cache key of the leased store.
        path: The store directory, valid while the lease is held.
    """

    def __init__(self, key: str, path: Path, lease_file: Path) -> None:
        self.key = key
        self.path = path
        self._mutex = threading.Lock()
        self._fd: int | None = _open_lock_file(lease_file)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # waits only while an eviction is under way
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return self._fd is not None

    def release(self) -> None:
        """Release the lease (idempotent)."""
        with self._mutex:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"Lease(key={self.key[:12]}..., path={str(self.path)!r}, {state})"


@contextlib.contextmanager
def exclusive_unleased(lease_file: Path) -> Iterator[bool]:
    """Try to lock ``lease_file`` exclusively without waiting.

    Yields:
        True while the exclusive lock is held (nobody holds a lease; new leases wait), False if
        a lease is held by any process, this one included.
    """
    fd = _open_lock_file(lease_file)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
