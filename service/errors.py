"""The error hierarchy of the service package.

Every error raised on purpose derives from :class:`ServiceError`; the HTTP layer maps each
class to one status code (see :data:`HTTP_STATUS`), the CLI to a one-line message.
"""

from __future__ import annotations

__all__ = [
    "HTTP_STATUS",
    "BuildFailedError",
    "CacheKeyError",
    "LockTimeoutError",
    "QueueFullError",
    "ServiceError",
    "SourceNotAllowedError",
    "StoreInUseError",
]


class ServiceError(Exception):
    """Base class of every error raised on purpose by :mod:`service`."""


class CacheKeyError(ServiceError, KeyError):
    """No complete store has this key (never built, evicted or removed)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown cache key"


class StoreInUseError(ServiceError):
    """The store is leased by a reader (a loader has it open); it cannot be removed now."""


class SourceNotAllowedError(ServiceError, ValueError):
    """A requested source path lies outside the configured source roots, or does not exist."""


class BuildFailedError(ServiceError):
    """A build ran but did not produce a complete store of the expected key."""


class LockTimeoutError(ServiceError, TimeoutError):
    """A lock or claim stayed held by another process past the timeout (names what and whose)."""


class QueueFullError(ServiceError):
    """Too many builds are queued; retry later."""


HTTP_STATUS: dict[type[Exception], int] = {
    CacheKeyError: 404,
    StoreInUseError: 409,
    SourceNotAllowedError: 400,
    BuildFailedError: 500,
    QueueFullError: 429,
    LockTimeoutError: 503,
}
