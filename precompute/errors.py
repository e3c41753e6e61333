"""The error hierarchy of the precompute package.

Every error :mod:`precompute` raises on purpose derives from :class:`PrecomputeError`: bad input
(a spec, a source, an input file, a store on disk) and a build its environment stopped (a
lock held, Ray unreachable, a shard task that died), so callers (the CLI, the service) can
turn them into one-line messages without catching unrelated bugs. An underlying exception
raised in the same process is chained as ``__cause__``; a shard task's failure comes back from
its Ray worker as a value, so :class:`BuildError` names its cause in the message instead.
"""

from __future__ import annotations

__all__ = [
    "BuildError",
    "BuildLockedError",
    "ClusterError",
    "DecodeError",
    "PrecomputeError",
    "SourceError",
    "SpecError",
    "StoreError",
    "StoreIncompleteError",
    "StoreMetadataError",
    "StoreMismatchError",
]


class PrecomputeError(Exception):
    """Base class of every error raised on purpose by :mod:`precompute`."""


class SpecError(PrecomputeError, ValueError):
    """A build spec value is invalid; the message names the field and the value."""


class SourceError(PrecomputeError):
    """The raw dataset cannot be listed: missing folder, malformed manifest, escaping path."""


class DecodeError(PrecomputeError):
    """One input file could not be decoded; ``key`` names it relative to the source root."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class StoreError(PrecomputeError):
    """A store on disk is not a valid nostall store (format, version or fields)."""


class StoreIncompleteError(StoreError):
    """The store's completion marker is missing: a build is running or was interrupted."""


class StoreMetadataError(StoreError):
    """A store's metadata is invalid; the message names the file and the key.

    A ``zarr.json`` that does not parse, or a key that is missing or has a wrong type or value.
    """


class StoreMismatchError(StoreError):
    """An existing output was built from another spec or source; resuming would mix them."""


class BuildLockedError(PrecomputeError):
    """Another build holds the lock on this output."""


class ClusterError(PrecomputeError):
    """Ray could not be started locally or reached at ``--ray-address``."""


class BuildError(PrecomputeError):
    """A shard task failed for a reason other than a bad input (disk full, worker died)."""
