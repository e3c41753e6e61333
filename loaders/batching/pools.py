"""Work for a thread pool, done on the calling thread once Python takes no new pool work.

``concurrent.futures`` refuses every ``submit`` once the main thread has returned (its exit hook
runs before Python waits for the other non-daemon threads): a training thread still iterating
a loader then failed with "cannot schedule new futures after interpreter shutdown". Its reads
are now done on that thread instead, one share after another.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["submit_or_run"]

T = TypeVar("T")


def submit_or_run(pool: Executor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit(fn, *args)``, or, where the pool refuses new work, ``fn`` run here.

    Returns:
        The pool's future, or a finished one holding ``fn``'s result or exception.
    """
    try:
        return pool.submit(fn, *args)
    except RuntimeError:  # shut down: the interpreter's (after the main thread) or the pool's
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # re-raised by the caller's result(), as from the pool
            done.set_exception(exc)
        return done
