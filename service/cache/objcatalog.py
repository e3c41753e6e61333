"""The catalog of a cache whose root is in object storage (``s3://bucket/prefix``).

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

from precompute.storage import objstore
from precompute.storage.location import location
from service.cache.catalog import CacheLayout, Entry
from service.errors import ServiceError

__all__ = ["ObjectLayout", "object_call"]


def object_call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call an :mod:`precompute.storage.objstore` function, turning failures into ``ServiceError``.

    ``FileNotFoundError``, ``FileExistsError`` and ``objstore.VersionChangedError`` pass
    through (callers branch on them).
    """
    try:
        return fn(*args, **kwargs)
    except (FileNotFoundError, FileExistsError, objstore.VersionChangedError):
        raise
    except OSError as exc:
        raise ServiceError(f"cache {what}: {exc}") from exc


class ObjectLayout(CacheLayout):
    """URLs under one ``s3://`` cache root, and reading/writing its entries and access times.

    ``root``, :meth:`store` and :meth:`building` are
    :class:`~precompute.storage.location.Location` objects (``str()`` gives the URL; no
    filesystem path); :attr:`url` is the root URL without a trailing slash.
    """

    def __init__(self, root: str | Path) -> None:
        objstore.split_url(str(root))  # a StoreError naming a URL without a bucket
        self.url = str(root).rstrip("/")
        self.root: Any = location(self.url)  # a Location, where the local layout has a Path

    def ensure(self) -> None:
        """Check the bucket can be listed (there are no folders to create)."""
        object_call("root", objstore.list_sizes, f"{self.url}/claims")

    def store_url(self, key: str) -> str:
        """Return the URL of the store of ``key``."""
        return f"{self.url}/stores/{key}"

    def store(self, key: str) -> Any:
        """Return the store of ``key`` (a :class:`~precompute.storage.location.Location`)."""
        return location(self.store_url(key))

    def building(self, key: str) -> Any:
        """Return where the store of ``key`` is built: its final prefix (no rename exists)."""
        return self.store(key)

    def entry_file(self, key: str) -> Any:
        """Return the entry object of ``key`` (a Location)."""
        return location(self.entry_url(key))

    def entry_url(self, key: str) -> str:
        """Return the URL of the entry of ``key``."""
        return f"{self.url}/catalog/{key}.json"

    def access_url(self, key: str) -> str:
        """Return the URL of the last-access object of ``key``."""
        return f"{self.url}/access/{key}.json"

    def claim_url(self, name: str) -> str:
        """Return the URL of the claim ``name`` (a key, or ``gc``)."""
        return f"{self.url}/claims/{name}.json"

    def lease_prefix(self, key: str) -> str:
        """Return the prefix under which readers of ``key`` record their leases."""
        return f"{self.url}/leases/{key}"

    def _get_json(self, url: str) -> Any:
        data = object_call("read", objstore.get_range, url).data
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ServiceError(f"{url}: corrupt cache object ({exc}); delete it") from exc

    def last_access(self, key: str, default: float) -> float:
        """Return the last use of ``key`` (``default`` if never recorded)."""
        try:
            doc = self._get_json(self.access_url(key))
        except FileNotFoundError:
            return default
        t = doc.get("t") if isinstance(doc, dict) else None
        return float(t) if isinstance(t, (int, float)) else default

    def read_entry(self, key: str) -> Entry | None:
        """Return the entry of ``key``, or None when there is none.

        Raises:
            ServiceError: The entry object is not a valid entry, or the store cannot be reached.
        """
        url = self.entry_url(key)
        try:
            doc = self._get_json(url)
            entry = Entry.from_dict(doc)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ServiceError(f"{url}: corrupt catalog entry ({exc}); delete it") from exc
        return dataclasses.replace(entry, last_access=self.last_access(key, entry.created))

    def write_entry(self, entry: Entry) -> None:
        """Publish ``entry`` (one PUT: readers see no entry or the whole one)."""
        body = json.dumps(entry.to_dict(), sort_keys=True).encode()
        object_call("publish", objstore.put_bytes, self.entry_url(entry.key), body)

    def touch(self, key: str, when: float | None = None) -> bool:
        """Record a use of ``key`` at ``when``; False if it has no entry (nothing recorded)."""
        try:
            object_call("lookup", objstore.head, self.entry_url(key))
        except FileNotFoundError:
            return False
        body = json.dumps({"t": time.time() if when is None else when}).encode()
        object_call("touch", objstore.put_bytes, self.access_url(key), body)
        return True

    def catalog_keys(self) -> list[str]:
        """Return the keys that have entries, sorted."""
        base = f"{self.url}/catalog/"
        urls = object_call("list", objstore.list_sizes, base.rstrip("/"))
        names = (u[len(base) :] for u in urls)
        return sorted(n[: -len(".json")] for n in names if n.endswith(".json") and "/" not in n)

    def store_keys(self) -> list[str]:
        """Return the keys that have objects under ``stores/`` (published or not), sorted."""
        base = f"{self.url}/stores/"
        urls = object_call("list", objstore.list_sizes, base.rstrip("/"))
        return sorted({u[len(base) :].split("/", 1)[0] for u in urls})

    def store_bytes(self, key: str) -> int:
        """Return the bytes of every object of the store of ``key``."""
        return sum(object_call("list", objstore.list_sizes, self.store_url(key)).values())

    def wipe(self, prefix_url: str) -> None:
        """Delete every object under ``prefix_url``."""
        for url in object_call("list", objstore.list_sizes, prefix_url):
            object_call("delete", objstore.delete, url)
