"""``s3://`` sources through fsspec without ``s3fs``: a small read-only filesystem on boto3.

Sources given as URLs are listed and read through fsspec (:mod:`precompute.sources.classes`). fsspec
reaches ``s3://`` through ``s3fs``, which nostall does not depend on; :func:`fsspec_s3` returns
the ``fsspec`` module with ``s3`` served by :class:`BotoS3FileSystem` (the same boto3 client and
configuration as :mod:`precompute.storage.objstore`) unless ``s3fs`` is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
from types import ModuleType
from typing import Any

from fsspec.spec import AbstractFileSystem

from precompute.storage import objstore

__all__ = ["BotoS3FileSystem", "fsspec_s3"]


class BotoS3FileSystem(AbstractFileSystem):  # type: ignore[misc]
    """Read-only ``s3://`` for fsspec: ``find``, ``ls``, ``info`` and whole-object reads."""

    protocol = ("s3", "s3a")
    root_marker = ""

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        for scheme in ("s3://", "s3a://"):
            text = text.removeprefix(scheme)
        return text.rstrip("/")

    def _url(self, path: str) -> str:
        return f"s3://{self._strip_protocol(path)}"

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Every object below ``path`` (one paginated listing)."""
        sizes = objstore.list_sizes(self._url(path))
        found = {
            url[len("s3://") :]: {"name": url[len("s3://") :], "size": size, "type": "file"}
            for url, size in sorted(sizes.items())
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
        name = self._strip_protocol(path)
        try:
            head = objstore.head_object(self._url(path))
        except FileNotFoundError:
            if self.find(path):
                return {"name": name, "size": 0, "type": "directory"}
            raise
        return {
            "name": name,
            "size": int(head["ContentLength"]),
            "type": "file",
            "LastModified": head.get("LastModified"),
        }

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> io.BytesIO:
        if "r" not in mode:
            raise NotImplementedError("s3:// sources are read-only here")
        return io.BytesIO(objstore.get_range(self._url(path)).data)


def fsspec_s3() -> ModuleType:
    """Return ``fsspec`` with ``s3://`` served by boto3 (unless ``s3fs`` is installed)."""
    fsspec = importlib.import_module("fsspec")
    if importlib.util.find_spec("s3fs") is None:
        for scheme in BotoS3FileSystem.protocol:
            fsspec.register_implementation(scheme, BotoS3FileSystem, clobber=True)
    return fsspec
