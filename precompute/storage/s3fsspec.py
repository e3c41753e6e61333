"""Object-store sources through fsspec without ``s3fs``: a read-only filesystem on the byte store.

Sources given as URLs are listed and read through fsspec (:mod:`precompute.sources.classes`).
fsspec reaches ``s3://`` through ``s3fs`` (``gs://`` through ``gcsfs``, ``az://`` through
``adlfs``), which nostall does not depend on; :func:`fsspec_s3` returns the ``fsspec`` module with
each such scheme served by :class:`StoreFileSystem` (the same
:class:`~precompute.storage.objects.ObjectStore` and configuration as the stores' own reads and
writes) unless that package is installed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
from types import ModuleType
from typing import Any

from fsspec.spec import AbstractFileSystem

from precompute.storage.location import Location, location

__all__ = ["BotoS3FileSystem", "StoreFileSystem", "fsspec_s3"]

_NATIVE = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}


class StoreFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """Read-only object storage for fsspec: ``find``, ``ls``, ``info`` and whole-object reads."""

    protocol = ("s3", "s3a", "gs", "az", "abfs")
    root_marker = ""

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        for scheme in cls.protocol:
            text = text.removeprefix(f"{scheme}://")
        return text.rstrip("/")

    def _at(self, path: str) -> Location:
        text = str(path)
        scheme = text.split("://", 1)[0] if "://" in text else self.protocol[0]  # as served
        scheme = "s3" if scheme == "s3a" else scheme
        return location(f"{scheme}://{self._strip_protocol(text)}")

    def _name(self, where: Location, key: str) -> str:
        return where.store.url(key).split("://", 1)[1]

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Every object below ``path`` (one paginated listing)."""
        where = self._at(path)
        found = {
            self._name(where, key): {"name": self._name(where, key), "size": m.size, "type": "file"}
            for key, m in sorted(where.list().items())
        }
        return found if detail else list(found)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        """The objects and folder-like prefixes directly under ``path``."""
        base = self._strip_protocol(path)
        entries: dict[str, dict[str, Any]] = {}
        for name, info in self.find(path, detail=True).items():
            head, _, rest = name[len(base) + 1 :].partition("/")
            key = f"{base}/{head}"
            entries[key] = {"name": key, "size": 0, "type": "directory"} if rest else info
        return list(entries.values()) if detail else list(entries)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """Size and modification time of an object (a HEAD); a prefix with objects is a dir."""
        name, where = self._strip_protocol(path), self._at(path)
        try:
            meta = where.store.head(where.key)
        except FileNotFoundError:
            if self.find(path):
                return {"name": name, "size": 0, "type": "directory"}
            raise
        return {"name": name, "size": meta.size, "type": "file", "LastModified": meta.modified}

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> io.BytesIO:
        if "r" not in mode:
            raise NotImplementedError("object-store sources are read-only here")
        return io.BytesIO(self._at(path).read_bytes())


BotoS3FileSystem = StoreFileSystem  # the name this filesystem had when it was boto3's


def fsspec_s3() -> ModuleType:
    """Return ``fsspec`` with object-store URLs served by :class:`StoreFileSystem`.

    A scheme whose own fsspec package is installed (``s3fs``, ``gcsfs``, ``adlfs``) keeps it.
    """
    fsspec = importlib.import_module("fsspec")
    for scheme, native in _NATIVE.items():
        if importlib.util.find_spec(native) is None:
            fsspec.register_implementation(scheme, _serving(scheme), clobber=True)
    return fsspec


@functools.cache
def _serving(scheme: str) -> type[StoreFileSystem]:
    """:class:`StoreFileSystem` for ``scheme``: fsspec hands it paths without their scheme."""
    if scheme in ("s3", "s3a"):
        return StoreFileSystem
    return type(f"StoreFileSystem_{scheme}", (StoreFileSystem,), {"protocol": (scheme,)})
