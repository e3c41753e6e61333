"""What every source lister shares: the URL test, the policy check, the per-input policy, the stop.

A build lists its source on a thread while Ray starts (:mod:`precompute.pipeline.start`). When Ray
fails to start, the build asks the listing to stop: :func:`listing_until` runs the listing
with a stop event that :func:`checkpoint` (called per folder scanned, per file stat-ed, hashed
or whose header is read) turns into :class:`ListingStopped`, so the thread ends at its next
file instead of walking the rest of the source. Outside :func:`listing_until` (the service,
``precompute inspect``, tests) :func:`checkpoint` does nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextvars import ContextVar, copy_context
from typing import Any, TypeVar

from precompute.errors import PrecomputeError, SourceError
from precompute.policy import show

__all__ = [
    "ON_ERROR",
    "ListingStopped",
    "check_policy",
    "checkpoint",
    "is_url",
    "listing_until",
    "locate",
    "per_input",
    "read_kept",
    "stat_of",
]

T = TypeVar("T")

# The policies a lister applies to one unusable input (see :func:`per_input`).
ON_ERROR = ("raise", "skip")

# The stop event of the listing running in this context (None: not a stoppable listing).
_STOP: ContextVar[threading.Event | None] = ContextVar("precompute_listing_stop", default=None)


class ListingStopped(PrecomputeError):
    """The build stopped its listing (Ray failed to start): the build reports its own error."""


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL other than ``file://`` (read through fsspec, never stat-ed)."""
    return "://" in path and not path.startswith("file://")


def check_policy(on_error: object) -> None:
    """Refuse an ``on_error`` that is neither ``raise`` nor ``skip`` (every lister's first step).

    Raises:
        SourceError: Naming the value (shortened, so a huge int or an odd object still prints).
    """
    if not (isinstance(on_error, str) and on_error in ON_ERROR):
        raise SourceError(f"on_error must be 'raise' or 'skip', got {show(on_error)}")


def per_input(src: str, on_error: str, skipped: list[tuple[str, str]], key: str, why: str) -> None:
    """Apply ``on_error`` to one unusable input found while listing ``src``.

    Raises:
        SourceError: Under ``on_error: raise``, naming ``src``, ``key`` and ``why``; under
            ``skip`` the ``(key, why)`` pair is recorded in ``skipped`` instead.
    """
    if on_error == "raise":
        raise SourceError(f"{src}: {key}: {why}")
    skipped.append((key, why))


def checkpoint() -> None:
    """Raise :class:`ListingStopped` if the listing running here was asked to stop.

    Raises:
        ListingStopped: The stop event of :func:`listing_until` is set.
    """
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise ListingStopped("the build stopped listing its source")


def listing_until(stop: threading.Event, fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(*args)`` so that its :func:`checkpoint` calls raise once ``stop`` is set."""

    def run() -> T:
        _STOP.set(stop)
        return fn(*args)

    return copy_context().run(run)


def read_kept(
    slot: dict[str, Any], path: str, read: Callable[[], T], keep: bool, extra: tuple[Any, ...] = ()
) -> T:
    """``read()`` the local file ``path``, or take what an earlier call kept of it in ``slot``.

    The CLI works out a source's fields before the build lists it, so both would read (or
    decode) the same file: the first call keeps what it read (``keep``), the next one takes
    it. What was kept is given out once, and only for the same file unchanged since (absolute
    path, size, mtime; plus ``extra``, e.g. the array key); any call drops it, so a process
    holds one such value at most. A URL, or a file that cannot be stat-ed, is always read.
    """
    local = path.removeprefix("file://")
    ident: tuple[Any, ...] | None = None
    if "://" not in local:
        try:
            st = os.stat(local)  # before the read: a file changed after it is read again
            ident = (os.path.abspath(local), st.st_size, st.st_mtime_ns, *extra)
        except OSError:
            ident = None  # read() names the problem
    same = ident is not None and slot.get("ident") == ident
    kept = slot.get("value") if same else None
    slot.clear()
    value: T = read() if kept is None else kept
    if keep and ident is not None:
        slot.update(ident=ident, value=value)
    return value


def locate(root: str, key: str) -> str:
    """The local path or URL of ``key`` (a path relative to ``root``, or absolute, or a URL)."""
    if is_url(key) or os.path.isabs(key):
        return key
    if not is_url(root):
        return os.path.join(root, *key.split("/"))
    return root.rstrip("/") + "/" + key


def stat_of(where: str) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a local path or URL (mtime 0 where the filesystem has none)."""
    if not is_url(where):
        st = os.stat(where)
        return st.st_size, st.st_mtime_ns
    from precompute.storage.s3fsspec import fsspec_s3

    fs, path = fsspec_s3().core.url_to_fs(where)
    info = fs.info(path)
    mtime = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    return int(info.get("size") or 0), int(float(mtime) * 1e9)
