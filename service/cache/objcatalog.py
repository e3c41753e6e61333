"""The catalog of a cache whose root is in object storage (``s3://bucket/prefix``, ``az://...``).

Layout under the root URL::

    stores/<key>/...         the store, written in place by the builder (never served before
                             its entry exists)
    catalog/<key>.json       the entry, PUT after the store is checked complete: the publish
                             step (an entry means a complete store)
    access/<key>.json        ``{"t": <unix time>}`` of the last use (the LRU clock), PUT on a hit
    claims/<key>.json        the build claim (a conditional PUT; see :mod:`service.coord.objclaim`)
    claims/gc.json           the claim serialising garbage collection
    leases/<key>/<id>.json   one object per reader holding the store

There is no rename in object storage, so the store is built under its final prefix and the
entry, PUT last, is what makes it visible. The last access lives in its own small object so
that a hit never rewrites the entry (a hit racing a removal could otherwise resurrect it).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.storage.base import VersionChangedError
from precompute.storage.location import Location, location
from service.cache.catalog import CacheLayout, Entry
from service.errors import ServiceError

__all__ = ["ObjectLayout", "names_under", "object_call", "relative"]


def object_call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a byte-store operation, turning failures into ``ServiceError``.

    ``FileNotFoundError``, ``FileExistsError`` and
    :class:`~precompute.storage.base.VersionChangedError` pass through (callers branch on them).
    """
    try:
        return fn(*args, **kwargs)
    except (FileNotFoundError, FileExistsError, VersionChangedError):
        raise
    except OSError as exc:
        raise ServiceError(f"cache {what}: {exc}") from exc


def relative(prefix: Location, key: str) -> str:
    """``key`` (of an object under ``prefix``) relative to ``prefix``: ``a/b`` under ``p``."""
    base = prefix.key.rstrip("/")
    return key[len(base) + 1 :] if base else key


def names_under(prefix: Location) -> list[str]:
    """The keys of every object under ``prefix``, relative to it, sorted (one LIST)."""
    return sorted(relative(prefix, key) for key in object_call("list", prefix.list))


class ObjectLayout(CacheLayout):
    """Objects under one cache root in object storage, and reading/writing its entries.

    ``root`` and every object or prefix a method returns are
    :class:`~precompute.storage.location.Location` objects (``str()`` gives the URL; no
    filesystem path); :attr:`url` is the root URL without a trailing slash.

    Raises:
        StoreError: ``root`` is not in object storage, or names no bucket.
    """

    def __init__(self, root: str | Path | Location) -> None:
        where = location(root)  # a StoreError naming a URL without a bucket
        if where.local:
            raise StoreError(f"{root}: not in object storage")
        self.root: Any = where  # a Location, where the local layout has a Path
        self._root = where
        self.url = str(where)

    def ensure(self) -> None:
        """Check the bucket can be listed (there are no folders to create)."""
        object_call("root", (self._root / "claims").list)

    def store(self, key: str) -> Any:
        """Return the store of ``key`` (a :class:`~precompute.storage.location.Location`)."""
        return self._root / "stores" / key

    def building(self, key: str) -> Any:
        """Return where the store of ``key`` is built: its final prefix (no rename exists)."""
        return self.store(key)

    def entry_file(self, key: str) -> Any:
        """Return the entry object of ``key`` (a Location)."""
        return self._root / "catalog" / f"{key}.json"

    def access_file(self, key: str) -> Location:
        """Return the last-access object of ``key``."""
        return self._root / "access" / f"{key}.json"

    def claim_file(self, name: str) -> Location:
        """Return the claim object ``name`` (a key, or ``gc``)."""
        return self._root / "claims" / f"{name}.json"

    def leases(self, key: str) -> Location:
        """Return the prefix under which readers of ``key`` record their leases."""
        return self._root / "leases" / key

    def _get_json(self, where: Location) -> Any:
        data = object_call("read", where.read_bytes)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ServiceError(f"{where}: corrupt cache object ({exc}); delete it") from exc

    def last_access(self, key: str, default: float) -> float:
        """Return the last use of ``key`` (``default`` if never recorded)."""
        try:
            doc = self._get_json(self.access_file(key))
        except FileNotFoundError:
            return default
        t = doc.get("t") if isinstance(doc, dict) else None
        return float(t) if isinstance(t, (int, float)) else default

    def read_entry(self, key: str) -> Entry | None:
        """Return the entry of ``key``, or None when there is none.

        Raises:
            ServiceError: The entry object is not a valid entry, or the store cannot be reached.
        """
        where = self.entry_file(key)
        try:
            doc = self._get_json(where)
            entry = Entry.from_dict(doc)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ServiceError(f"{where}: corrupt catalog entry ({exc}); delete it") from exc
        return dataclasses.replace(entry, last_access=self.last_access(key, entry.created))

    def write_entry(self, entry: Entry) -> None:
        """Publish ``entry`` (one PUT: readers see no entry or the whole one)."""
        body = json.dumps(entry.to_dict(), sort_keys=True).encode()
        object_call("publish", self.entry_file(entry.key).write_bytes, body)

    def touch(self, key: str, when: float | None = None) -> bool:
        """Record a use of ``key`` at ``when``; False if it has no entry (nothing recorded)."""
        if not object_call("lookup", self.entry_file(key).exists):
            return False
        body = json.dumps({"t": time.time() if when is None else when}).encode()
        object_call("touch", self.access_file(key).write_bytes, body)
        return True

    def catalog_keys(self) -> list[str]:
        """Return the keys that have entries, sorted."""
        names = names_under(self._root / "catalog")
        return [n[: -len(".json")] for n in names if n.endswith(".json") and "/" not in n]

    def store_keys(self) -> list[str]:
        """Return the keys that have objects under ``stores/`` (published or not), sorted."""
        return sorted({n.split("/", 1)[0] for n in names_under(self._root / "stores")})

    def store_bytes(self, key: str) -> int:
        """Return the bytes of every object of the store of ``key``."""
        return sum(m.size for m in object_call("list", self.store(key).list).values())

    def wipe(self, prefix: Location) -> None:
        """Delete every object under ``prefix``."""
        for key in object_call("list", prefix.list):
            object_call("delete", prefix.store.delete, key)
