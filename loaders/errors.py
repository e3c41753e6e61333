"""The error hierarchy of the loaders package.

Every error a user can cause while opening or streaming a store derives from
:class:`LoaderError`. Errors raised on background threads are carried back as values and
re-raised on the training thread, still naming the array, shard file and chunk.
"""

from __future__ import annotations

__all__ = [
    "ChunkReadError",
    "CorruptChunkError",
    "DeviceUnavailableError",
    "LoaderError",
    "StoreMetadataError",
    "StoreOpenError",
    "UnsupportedArrayError",
    "WorkerError",
]


class LoaderError(Exception):
    """Base class of every error raised on purpose by :mod:`loaders`."""


class StoreOpenError(LoaderError):
    """The store cannot be streamed: incomplete, another format version, or a field missing.

    Raised by loader constructors, before the first batch. The underlying :mod:`precompute`
    error, when there is one, is chained as ``__cause__``.
    """

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(f"cannot open store {store}: {reason}")
        self.store = store
        self.reason = reason


class StoreMetadataError(StoreOpenError):
    """The store's metadata is invalid; the message names the file and the key.

    A ``zarr.json`` that does not parse, or a key that is missing or has a wrong type or value.
    """


class ChunkReadError(LoaderError):
    """Reading one inner chunk failed; the message names the array, shard file and chunk."""

    def __init__(self, array: str, shard_file: str, chunk: tuple[int, ...], reason: str) -> None:
        super().__init__(f"{array}: shard file {shard_file}, chunk {chunk}: {reason}")
        self.array = array
        self.shard_file = shard_file
        self.chunk = chunk
        self.reason = reason


class CorruptChunkError(ChunkReadError):
    """A chunk or shard index failed its crc32c check or is truncated: never return garbage."""


class UnsupportedArrayError(LoaderError):
    """An array's metadata is not something the reader understands at all."""


class DeviceUnavailableError(LoaderError, ValueError):
    """The requested device does not exist here (e.g. ``cuda`` on a machine without CUDA)."""


class WorkerError(LoaderError):
    """An unexpected error on a background thread, re-raised on the consumer thread."""
