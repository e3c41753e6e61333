"""One CPU, one thread: the native thread pools of a process while it builds shards.

A shard task is given CPUs (Ray's ``num_cpus``, or the in-process runner's share) and decodes
its samples on that many threads (:mod:`precompute.pipeline.fieldwork`), each thread one CPU. A
library that runs its own pool inside one sample (torch's intra-op threads in a log-mel, numpy's
BLAS, any OpenMP code) would start as many threads again per sample thread and fight the
others for the same cores, which makes small per-sample work many times slower on a busy
machine. While :func:`one_thread_pools` is entered, every such pool of the process runs one
thread: torch (:func:`torch.set_num_threads`, once torch is imported) and
the BLAS and OpenMP libraries loaded in the process (``threadpoolctl``, a small library of
scikit-learn's maintainers that finds them in the process's loaded libraries). A library
loaded while a build runs (torch imported by the first log-mel) is limited at the next
:func:`settle`, which the shard loop calls after each sample. Leaving restores what was there.

The limits are process-wide: entered by several threads (the in-process runner's shard
tasks), they are applied by the first and restored by the last. Thread counts change no value:
the stored bytes are the same with and without (a test compares the pinned stores).
"""

from __future__ import annotations

import contextvars
import itertools
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["Stopped", "active", "one_thread_pools", "ordered_map", "settle", "thread_pools"]

T = TypeVar("T")
R = TypeVar("R")

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {"depth": 0, "torch": None, "limits": [], "modules": 0}


def active() -> bool:
    """Whether a build's limits are in force in this process."""
    return bool(_STATE["depth"])


@contextmanager
def one_thread_pools() -> Iterator[None]:
    """Every native thread pool of this process at one thread while inside (re-entrant)."""
    with _LOCK:
        _STATE["depth"] += 1
        if _STATE["depth"] == 1:
            _STATE["modules"] = -1  # apply at once
            _apply()
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                _restore()


def settle() -> None:
    """Limit the pools of the libraries loaded since the last look (cheap when none was)."""
    if _STATE["depth"] and len(sys.modules) != _STATE["modules"]:
        with _LOCK:
            if _STATE["depth"]:
                _apply()


def _apply() -> None:
    """Limit torch (if imported) and every BLAS/OpenMP library loaded now (lock held)."""
    _STATE["modules"] = len(sys.modules)
    torch = sys.modules.get("torch")
    if torch is not None and _STATE["torch"] is None and hasattr(torch, "set_num_threads"):
        _STATE["torch"] = torch.get_num_threads()
        torch.set_num_threads(1)
    from threadpoolctl import threadpool_limits

    _STATE["limits"].append(threadpool_limits(limits=1))


def _restore() -> None:
    """Undo :func:`_apply`: the pools' thread counts as they were (lock held)."""
    for limits in reversed(_STATE["limits"]):
        limits.restore_original_limits()
    _STATE["limits"] = []
    if _STATE["torch"] is not None:
        sys.modules["torch"].set_num_threads(_STATE["torch"])
        _STATE["torch"] = None


def thread_pools(threads: int, prefix: str) -> ThreadPoolExecutor:
    """A pool of ``threads`` threads whose OpenMP runs one thread in each of them.

    OpenMP keeps its thread count per calling thread, and a new thread starts from the
    process's default: each thread of the pool sets its own (torch's and BLAS's counts are the
    process's).
    """
    return ThreadPoolExecutor(threads, thread_name_prefix=prefix, initializer=_one_omp_thread)


def _one_omp_thread() -> None:
    if active():
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="openmp")


class Stopped(Exception):
    """A shard task left off because its build stopped (another task failed, or Ctrl-C)."""


def ordered_map(
    fn: Callable[[T], R], items: Sequence[T], threads: int, stop: threading.Event | None = None
) -> Iterator[R]:
    """``fn`` of each item, in order; on ``threads`` threads when more than one.

    Each call runs in a copy of the caller's context (build notes reach the caller's
    collection), at most ``2 * threads`` ahead of the item the caller takes. Leaving the
    iterator early (an error under ``raise``) cancels the calls not started.

    Raises:
        Stopped: ``stop`` was set.
    """
    if threads <= 1:
        for item in items:
            _check(stop)
            yield fn(item)
        return
    with thread_pools(threads, "precompute-sample") as pool:
        pending: deque[Future[R]] = deque()
        queue = iter(items)
        try:
            for item in itertools.islice(queue, 2 * threads):
                pending.append(pool.submit(contextvars.copy_context().run, fn, item))
            while pending:
                _check(stop)
                got = pending.popleft().result()
                for item in itertools.islice(queue, 1):
                    pending.append(pool.submit(contextvars.copy_context().run, fn, item))
                yield got
        finally:
            for future in pending:
                future.cancel()


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped("the build stopped")
