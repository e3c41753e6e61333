"""The byte-store interface: every store byte the project reads or writes goes through one.

A :class:`ByteStore` holds whole objects of bytes under ``/``-separated keys. It has two kinds of
implementation: :class:`~precompute.storage.local.LocalStore` (a filesystem: atomic renames,
``preadv`` and ``mmap`` reads) and :class:`~precompute.storage.objects.ObjectStore` (S3, GCS or
Azure through obstore). Code above this layer holds a :class:`~precompute.storage.location.Location`
(a store and a key) and never asks which kind it has.

The operations, as zarr-python's ``Store`` and obstore name them:

- :meth:`~ByteStore.get`: the whole object, a range of it, or its last ``n`` bytes, optionally
  only from one version (``if_version``: an object store's ETag, a file's stamp);
  :meth:`~ByteStore.get_ranges` several ranges at once; :meth:`~ByteStore.read_into` a range
  straight into the caller's buffers.
- :meth:`~ByteStore.put` a whole object (atomic: a reader sees the old one or the new one),
  :meth:`~ByteStore.put_if_absent`, :meth:`~ByteStore.put_if_match` (a version).
- :meth:`~ByteStore.list` the objects under a folder-like prefix with their sizes, versions and
  modification times (:meth:`~ByteStore.list_dir` the names directly under it);
  :meth:`~ByteStore.head` one; :meth:`~ByteStore.delete` one.

Coordination (:meth:`~ByteStore.exclusive`, the build lock; :meth:`~ByteStore.ages`, the age of
objects by the store's own clock) is a separate concern with the same two kinds: ``flock`` and
file times locally, conditional writes and the server's clock in object storage.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

__all__ = ["Blob", "ByteStore", "Data", "Meta", "Stamp", "VersionChangedError"]

Stamp = tuple[int, int, int]  # a cheap version of one object: (inode, size, mtime ns) locally
Data = bytes | bytearray | memoryview | Sequence[Any]  # one buffer, or buffers written in order


class VersionChangedError(OSError):
    """A conditional write (``if_match``) found the object changed or gone: another wrote it."""


@dataclass(frozen=True)
class Meta:
    """What a store says about one object.

    Attributes:
        size: Its bytes.
        version: An opaque version tag: an object store's ETag, a file's inode, size and mtime.
        modified: When it was last written, by the store's clock (None where unknown).
    """

    size: int
    version: str
    modified: datetime | None = None


@dataclass(frozen=True)
class Blob:
    """Bytes read from an object, and what the read says about the whole object.

    Attributes:
        data: The bytes read (a buffer: ``bytes`` or a zero-copy view).
        size: Bytes of the whole object.
        version: The version the bytes come from.
        age_s: Seconds since the object was last written, by the store's clock, where the read
            tells (:meth:`ByteStore.get_dated`); None otherwise.
        stamp: The version as a :data:`Stamp`, comparable with :meth:`ByteStore.stamp`.
    """

    data: Any
    size: int
    version: str
    age_s: float | None = None
    stamp: Stamp = (0, 0, 0)


class ByteStore(ABC):
    """Whole objects of bytes under ``/``-separated keys (see the module docstring).

    Errors: a missing object raises :class:`FileNotFoundError`; a version that no longer holds
    raises :class:`VersionChangedError` (writes) or :class:`OSError` (reads); every other
    failure an :class:`OSError` naming the object (:meth:`url`), never a credential.
    """

    remote: ClassVar[bool] = False  # reads cross a network: worth a local read-through cache

    @abstractmethod
    def url(self, key: str) -> str:
        """The address of ``key`` for messages: a path, or ``scheme://bucket/key``."""

    @abstractmethod
    def key_of(self, url: str) -> str:
        """The key whose :meth:`url` is ``url``."""

    @abstractmethod
    def join(self, key: str, name: str) -> str:
        """The key of ``name`` under ``key``."""

    @abstractmethod
    def get(
        self,
        key: str,
        start: int | None = None,
        length: int | None = None,
        *,
        if_version: str | None = None,
    ) -> Blob:
        """Read ``length`` bytes at ``start`` (``start`` None: the last ``length``; both: all).

        ``if_version``: only from that version of the object (else an :class:`OSError`).
        """

    def get_ranges(
        self, key: str, ranges: Sequence[tuple[int, int]], *, if_version: str | None = None
    ) -> list[Any]:
        """Read several ``(start, length)`` ranges of one object, several requests in flight."""
        if len(ranges) <= 1:
            return [self.get(key, s, n, if_version=if_version).data for s, n in ranges]
        with ThreadPoolExecutor(min(len(ranges), 16)) as pool:
            blobs = pool.map(lambda r: self.get(key, r[0], r[1], if_version=if_version), ranges)
            return [b.data for b in blobs]

    def read_into(
        self,
        key: str,
        buffers: Sequence[Any],
        offset: int,
        *,
        if_version: str | None = None,
    ) -> int:
        """Read ``buffers``' total bytes at ``offset`` into them, in order; return bytes read.

        A short read (the object ends first) fills what it can: the caller reports it. With
        ``if_version`` the bytes come from that version or an :class:`OSError` is raised, also
        from a server that ignores the condition (the version read is compared).
        """
        views = [memoryview(b).cast("B") for b in buffers]
        blob = self.get(key, offset, sum(v.nbytes for v in views), if_version=if_version)
        if if_version and blob.version and blob.version != if_version:
            raise OSError(f"{self.url(key)}: the object was replaced while the store was read")
        got = memoryview(blob.data)
        done = 0
        for view in views:
            n = min(view.nbytes, got.nbytes - done)
            view[:n] = got[done : done + n]
            done += n
        return done

    @abstractmethod
    def head(self, key: str) -> Meta:
        """Size and version of one object (:class:`FileNotFoundError` if there is none)."""

    def stamp(self, key: str) -> Stamp | None:
        """A cheap version of ``key`` for a reader to check per read; None: the read checks."""
        return None

    @abstractmethod
    def put(self, key: str, data: Data) -> str:
        """Write ``data`` as the whole object ``key`` (atomically); return its version."""

    @abstractmethod
    def put_if_absent(self, key: str, data: Data) -> str:
        """:meth:`put` only if ``key`` does not exist (else :class:`FileExistsError`)."""

    @abstractmethod
    def put_if_match(self, key: str, data: Data, version: str) -> str:
        """:meth:`put` only over ``version`` of ``key`` (else :class:`VersionChangedError`)."""

    @abstractmethod
    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete ``key`` (no error if it does not exist); ``if_match``: only that version."""

    @abstractmethod
    def list_dir(self, prefix: str) -> list[str]:
        """The names directly under the folder-like ``prefix`` (objects and sub-folders)."""

    @abstractmethod
    def list(self, prefix: str) -> dict[str, Meta]:
        """Every object under the folder-like ``prefix`` by key (none: an empty dict)."""

    @abstractmethod
    def get_dated(self, key: str) -> Blob:
        """The whole object with its ``age_s`` by the store's clock, in one read."""

    @abstractmethod
    def ages(self, prefix: str) -> dict[str, float]:
        """Seconds since each object under ``prefix`` was last written, by the store's clock."""

    @abstractmethod
    def zarr(self, key: str, *, read_only: bool = True) -> Any:
        """A zarr-python store rooted at ``key`` (zarr's own class for this kind of store)."""

    @abstractmethod
    def exclusive(self, key: str, owner: str) -> AbstractContextManager[None]:
        """Hold the lock object ``key`` for a writer of ``owner`` (a store) while within.

        Raises:
            BuildLockedError: Another live writer holds it (the message names ``owner``).
        """
