"""The error hierarchy of the precompute package.

Every error :mod:`precompute` raises on purpose derives from :class:`PrecomputeError`: bad input
(a spec, a source, an input file, a store on disk) and a build its environment stopped (a
lock held, Ray unreachable, a shard task that died), so callers (the CLI, the service) can
turn them into one-line messages without catching unrelated bugs. An underlying exception
raised in the same process is chained as ``__cause__``; a shard task's failure comes back from
its Ray worker as a value, so :class:`BuildError` names its cause in the message instead.
"""

from __future__ import annotations

import re

# ``<_io.BytesIO object at 0x7f...>`` and the like: a memory address differs on every run.
_ADDRESS = re.compile(r"\s*<[^<>]*\bat 0x[0-9a-fA-F]+>|\s+at 0x[0-9a-fA-F]+")


def stable_reason(text: str) -> str:
    """Return ``text`` without object reprs that carry memory addresses (stable across runs)."""
    return _ADDRESS.sub("", text)


__all__ = [
    "BuildError",
    "BuildLockedError",
    "ClassListWarning",
    "ClusterError",
    "DecodeError",
    "InputError",
    "PrecomputeError",
    "SourceError",
    "SpecError",
    "SplitWarning",
    "StoreError",
    "StoreIncompleteError",
    "StoreMetadataError",
    "StoreMismatchError",
    "Terminated",
    "stable_reason",
]


class PrecomputeError(Exception):
    """Base class of every error raised on purpose by :mod:`precompute`."""


class Terminated(BaseException):
    """The process was sent SIGTERM (a batch scheduler's stop): it unwinds as Ctrl-C does.

    Raised on the main thread by the handler ``precompute build`` installs (exit 143); a
    ``BaseException``, so no ``except Exception`` takes it for a failure to record.
    """


class SpecError(PrecomputeError, ValueError):
    """A build spec value is invalid; the message names the field and the value."""


class SourceError(PrecomputeError):
    """The raw dataset cannot be listed: missing folder, malformed manifest, escaping path."""


class DecodeError(PrecomputeError):
    """One input file could not be decoded; ``key`` names it relative to the source root.

    The ``reason`` is stable text (:func:`stable_reason`): two builds of the same source
    record the same reasons.
    """

    def __init__(self, key: str, reason: str) -> None:
        reason = stable_reason(reason)
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class InputError(PrecomputeError, OSError):
    """One input cannot be read safely: not a regular file, over ``max_bytes``, or stuck.

    An :class:`OSError` too, so code that handles unreadable files handles these. ``where``
    is the path or URL, ``reason`` the stable text without it.
    """

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str]]:
        return (type(self), (self.where, self.reason))


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


class ClassListWarning(UserWarning):
    """A build's class names index labels otherwise than a store of the same data does."""


class SplitWarning(UserWarning):
    """A split's rule cannot do what it says (stratified, but every unit in one stratum)."""


class ClusterError(PrecomputeError):
    """Ray could not be started locally or reached at ``--ray-address``."""


class BuildError(PrecomputeError):
    """A shard task failed for a reason other than a bad input (disk full, worker died)."""
