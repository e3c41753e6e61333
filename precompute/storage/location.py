"""Where a store lies: a byte store and a key in it, named by a path or a URL.

:func:`location` is the one place that reads a URL's scheme: a local path (or ``file://``) is a
key of the :class:`~precompute.storage.local.LocalStore`; ``s3://``, ``gs://`` or ``az://``
(``abfs://``) is a key of the bucket's :class:`~precompute.storage.objects.ObjectStore`. A
:class:`Location` joins names with ``/``, reads and writes whole objects, lists what lies under it
and prints as the path or URL it was named by. It is not a :class:`pathlib.Path`: a local one is
path-like (``os.fspath`` gives the path), an object-store one is not, so no filesystem call can
act on a URL by mistake.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.storage.base import ByteStore, Data, Meta
from precompute.storage.local import LocalStore

__all__ = ["Location", "is_url", "location", "open_array", "scheme_of", "store_path"]

_LOCAL = LocalStore()


def scheme_of(text: str) -> str:
    """The URL scheme of ``text`` (``""`` for a plain path; ``file`` for ``file://``)."""
    head, sep, _ = text.partition("://")
    return head.lower() if sep and head.isidentifier() else ""


def is_url(text: str | os.PathLike[str] | Location) -> bool:
    """Whether ``text`` names something other than a local path (``file://`` is local)."""
    if isinstance(text, Location):
        return text.store.remote
    return scheme_of(os.fspath(text)) not in ("", "file")


@dataclass(frozen=True)
class Location:
    """A key in a byte store (see the module docstring).

    Attributes:
        store: The byte store.
        key: The key (a path for the local store, an object name in the bucket otherwise).
    """

    store: ByteStore
    key: str

    def __str__(self) -> str:
        return self.store.url(self.key)

    def __repr__(self) -> str:
        return f"Location({str(self)!r})"

    def __fspath__(self) -> str:
        if self.store.remote:
            raise TypeError(f"{self}: an object-store location has no filesystem path")
        return self.key

    def __reduce__(self) -> tuple[Any, ...]:
        return (location, (str(self),))

    def __truediv__(self, name: str) -> Location:
        return Location(self.store, self.store.join(self.key, name))

    @property
    def name(self) -> str:
        """The last component of the key."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        """The location one level up."""
        head = self.key.rstrip("/").rpartition("/")[0]
        return Location(self.store, head or ("/" if self.key.startswith("/") else ""))

    @property
    def local(self) -> bool:
        """Whether this is a path of the local filesystem."""
        return not self.store.remote

    def read_bytes(self) -> bytes:
        """The whole object."""
        return bytes(self.store.get(self.key).data)

    def read_text(self, encoding: str = "utf-8") -> str:
        """The whole object as text."""
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: Data) -> str:
        """Write the whole object (atomically); return its version."""
        return self.store.put(self.key, data)

    def head(self) -> Meta:
        """Size, version and modification time of the object (:meth:`ByteStore.head`)."""
        return self.store.head(self.key)

    def size(self) -> int:
        """Bytes of the object (:class:`FileNotFoundError` if missing)."""
        return self.head().size

    def exists(self) -> bool:
        """Whether an object lies at this key."""
        try:
            self.store.head(self.key)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return False
        return True

    is_file = exists

    def list(self) -> dict[str, Meta]:
        """Every object under this location, by key."""
        return self.store.list(self.key)

    def delete(self) -> None:
        """Delete the object (no error if there is none)."""
        self.store.delete(self.key)

    def absolute(self) -> Location:
        """A local path made absolute (against the working folder); any other as it is."""
        return self if self.store.remote else Location(self.store, str(Path(self.key).absolute()))

    def zarr(self, *, read_only: bool = True) -> Any:
        """A zarr-python store rooted here (:meth:`ByteStore.zarr`)."""
        return self.store.zarr(self.key, read_only=read_only)

    def path(self) -> Path:
        """The local path (a :class:`TypeError` for an object-store location)."""
        return Path(os.fspath(self))


def location(target: str | os.PathLike[str] | Location) -> Location:
    """Return the :class:`Location` of a local path, a ``file://`` URL or an object-store URL.

    Raises:
        StoreError: A URL of a scheme no store serves, or one without a bucket.
    """
    if isinstance(target, Location):
        return target
    text = os.fspath(target)
    scheme = scheme_of(text)
    if not scheme:
        return Location(_LOCAL, str(Path(text)))
    if scheme == "file":
        return Location(_LOCAL, str(Path(text[len("file://") :])))
    from precompute.storage.objects import SCHEMES, ObjectStore

    if scheme not in SCHEMES:
        served = ", ".join(f"{s}://" for s in SCHEMES)
        raise StoreError(f"{text}: must be a local path or an object-store URL ({served})")
    bucket, _, key = text[len(scheme) + 3 :].partition("/")
    if not bucket:
        article = "a" if scheme == "gs" else "an"  # "an s3", "an az", "a gs"
        raise StoreError(f"{text}: not {article} {scheme}://bucket/key URL")
    return Location(ObjectStore.for_root(f"{scheme}://{bucket}"), key.strip("/"))


def open_array(target: str | os.PathLike[str] | Location) -> Any:
    """Open the zarr array at ``target`` (a folder or an object-store URL) read-only."""
    import zarr

    where = location(target)
    return zarr.open_array(store=where.parent.zarr(), path=where.name, mode="r")


def store_path(path: str | os.PathLike[str] | Location) -> Path | Location:
    """A local path as a :class:`~pathlib.Path`; an object-store URL as a :class:`Location`.

    Both join names with ``/`` and read (``read_text``, ``is_file``, ``exists``), so format code
    that only joins and reads takes either; a :class:`Location` stays one.
    """
    if isinstance(path, (Path, Location)):
        return path
    text = os.fspath(path)
    return location(text) if is_url(text) else Path(text)
