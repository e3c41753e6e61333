"""What every source lister shares: the URL test, the policy check, the per-input policy, the stop.

A build lists its source on a thread while Ray starts (:mod:`precompute.jobstart`). When Ray
fails to start, the build asks the listing to stop: :func:`listing_until` runs the listing
with a stop event that :func:`checkpoint` (called per folder scanned, per file stat-ed, hashed
or whose header is read) turns into :class:`ListingStopped`, so the thread ends at its next
file instead of walking the rest of the source. Outside :func:`listing_until` (the service,
``precompute inspect``, tests) :func:`checkpoint` does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, copy_context
from typing import TypeVar

from precompute.errors import PrecomputeError, SourceError
from precompute.policy import show

__all__ = [
    "ON_ERROR",
    "ListingStopped",
    "check_policy",
    "checkpoint",
    "is_url",
    "listing_until",
    "per_input",
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
