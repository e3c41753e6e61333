"""Leases: a store that a reader holds open is never evicted or removed.

:class:`StoreLease` is what every lease shares (the key, the path, an idempotent
:meth:`~StoreLease.release` also run on ``with`` exit and garbage collection); each kind of
cache root says only how a hold is dropped. A lease still held when the interpreter exits (a
loader never closed) is released by an exit hook, while the modules a release needs are whole.

A local lease (:class:`Lease`) is a *shared* ``flock`` on ``leases/<key>.lease``, held for as
long as the reader uses the store. The kernel drops it when the holder's file descriptor closes,
so a crashed reader never pins a store forever. Eviction and removal take the *exclusive* lock
without blocking; when that fails, somebody holds a lease and the store is skipped.

Lease files are never unlinked: unlinking a lock file while others wait on it would split them
across two inodes and break mutual exclusion. Leases in object storage:
:class:`service.coord.objlease.ObjectLease`.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import fcntl
import os
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from service.errors import ServiceError

__all__ = ["Lease", "StoreLease", "exclusive_unleased"]

_HELD: weakref.WeakSet[StoreLease] = weakref.WeakSet()  # leases taken and not yet released
_EXIT_HOOK = threading.Lock()  # guards the one registration of _release_at_exit
_hooked = False


def _release_at_exit() -> None:
    """Release every lease still held: the process exits without closing its readers.

    An ``atexit`` hook, registered when the first lease is taken (after the storage clients a
    release uses were imported, so it runs before their own exit hooks). Without it a forgotten
    lease was released by ``__del__`` while the interpreter tore its modules down, which failed
    with a traceback, and a lease object in object storage was left for a collection.
    """
    for lease in list(_HELD):
        with contextlib.suppress(ServiceError, OSError):
            lease.release()


def _track(lease: StoreLease) -> None:
    global _hooked
    with _EXIT_HOOK:
        if not _hooked:
            atexit.register(_release_at_exit)
            _hooked = True
        _HELD.add(lease)


class StoreLease(abc.ABC):
    """A reader's hold on one store, released by :meth:`release`, ``with`` exit or collection.

    A subclass takes its hold in ``__init__`` after calling this one, then calls
    :meth:`_acquired`; :meth:`_drop` lets the hold go (called once).

    Attributes:
        key: The cache key of the leased store.
        path: The store, valid while the lease is held.
    """

    def __init__(self, key: str, path: Path) -> None:
        self.key = key
        self.path = path
        self._mutex = threading.Lock()
        self._held = False

    def _acquired(self) -> None:
        with self._mutex:
            self._held = True
        _track(self)

    def _lost(self) -> None:
        """The hold was taken away (a collection judged it dead): not held, nothing to drop."""
        with self._mutex:
            self._held = False

    @abc.abstractmethod
    def _drop(self) -> None:
        """Let the hold go (called once, by the first :meth:`release`)."""

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return self._held

    def release(self) -> None:
        """Release the lease (idempotent)."""
        with self._mutex:
            held, self._held = self._held, False
        if held:
            self._drop()

    def __enter__(self) -> StoreLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:
        if not self._held:  # released, by its reader or at exit: module globals may be gone
            return
        with contextlib.suppress(ServiceError, OSError, ImportError):
            self.release()  # a forgotten lease, collected while the process runs

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"{type(self).__name__}(key={self.key[:12]}..., path={str(self.path)!r}, {state})"


def _open_lock_file(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


class Lease(StoreLease):
    """A shared lock on one store of a local cache; the kernel drops it when the holder dies."""

    def __init__(self, key: str, path: Path, lease_file: Path) -> None:
        super().__init__(key, path)
        self._fd = _open_lock_file(lease_file)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # waits only while an eviction is under way
        except BaseException:
            os.close(self._fd)
            raise
        self._acquired()

    def _drop(self) -> None:
        os.close(self._fd)  # closing the only descriptor drops the flock


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
