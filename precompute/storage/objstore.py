"""Object storage by URL: ``scheme://bucket/key`` functions over :class:`ObjectStore`.

The older, URL-at-a-time face of the object store, for the cache's object coordination
(:mod:`service.objholder` and its neighbours) until those hold a
:class:`~precompute.storage.location.Location` too: each call opens (once per process and bucket)
the bucket's :class:`~precompute.storage.objects.ObjectStore` and runs one of its operations.

Writes can be conditional: :func:`put_bytes` with ``only_new`` (``If-None-Match: *``) or
``if_match`` (an ETag), :func:`delete` with ``if_match``; a lost ``if_match`` raises
:class:`VersionChangedError`. :func:`put_bytes` returns the new ETag. :func:`get_range` of a whole
object also gives its age by the store's clock (``age_s``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from precompute.errors import StoreError
from precompute.storage.base import ByteStore, VersionChangedError
from precompute.storage.location import Location, is_url, location, store_path

__all__ = [
    "Range",
    "VersionChangedError",
    "delete",
    "get_range",
    "head",
    "head_object",
    "is_object_url",
    "list_ages",
    "list_sizes",
    "put_bytes",
    "split_url",
    "store_path",
]


def is_object_url(path: str | os.PathLike[str] | Location) -> bool:
    """Whether ``path`` is an object-store URL (or location)."""
    return is_url(path)


def _at(url: str) -> tuple[ByteStore, str]:
    loc = location(url)
    if not loc.store.remote:
        raise StoreError(f"{url}: not an object-store URL")
    return loc.store, loc.key


def split_url(url: str) -> tuple[str, str]:
    """Return ``(bucket, key)`` of ``scheme://bucket/key``.

    Raises:
        StoreError: Not an object-store URL with a bucket.
    """
    store, key = _at(url)
    return store.url("").split("://", 1)[1], key


@dataclass(frozen=True)
class Range:
    """Bytes of a GET and what the response says about the whole object.

    ``age_s``: seconds since the object was last written, by the server's clock; given for a
    whole-object read (None where the response lacks a date).
    """

    data: bytes
    size: int  # of the whole object
    etag: str
    age_s: float | None = None


def get_range(
    url: str, start: int | None = None, length: int | None = None, *, if_match: str | None = None
) -> Range:
    """GET ``length`` bytes at ``start`` of ``url`` (``start`` None: the last ``length``).

    Both None: the whole object, with its age. ``if_match``: only from that ETag's version.

    Raises:
        FileNotFoundError: No such object.
        OSError: Any other failure (naming the URL), also a version ``if_match`` no longer names.
    """
    store, key = _at(url)
    if start is None and length is None and if_match is None:
        blob = store.get_dated(key)
    else:
        blob = store.get(key, start, length, if_version=if_match)
    return Range(bytes(blob.data), blob.size, blob.version, blob.age_s)


def head_object(url: str) -> dict[str, Any]:
    """``ContentLength``, ``ETag`` and ``LastModified`` of the object ``url``."""
    store, key = _at(url)
    meta = store.head(key)
    return {"ContentLength": meta.size, "ETag": meta.version, "LastModified": meta.modified}


def head(url: str) -> tuple[int, str]:
    """Return ``(size, etag)`` of the object ``url`` (FileNotFoundError if missing)."""
    store, key = _at(url)
    meta = store.head(key)
    return meta.size, meta.version


def put_bytes(url: str, data: bytes, *, only_new: bool = False, if_match: str | None = None) -> str:
    """PUT ``data`` as the whole object ``url``; return its ETag.

    Args:
        url: Destination.
        data: The object's bytes.
        only_new: Fail if the object exists (``If-None-Match: *``): :class:`FileExistsError`.
        if_match: Replace only that ETag's version: else :class:`VersionChangedError`.

    Raises:
        ValueError: Both ``only_new`` and ``if_match``.
    """
    if only_new and if_match:
        raise ValueError(f"{url}: a PUT is only_new or if_match={if_match!r}, not both")
    store, key = _at(url)
    if only_new:
        return store.put_if_absent(key, data)
    if if_match:
        return store.put_if_match(key, data, if_match)
    return store.put(key, data)


def delete(url: str, *, if_match: str | None = None) -> None:
    """Delete the object ``url`` (no error if missing); ``if_match``: only that version."""
    store, key = _at(url)
    store.delete(key, if_match=if_match)


def list_sizes(prefix_url: str) -> dict[str, int]:
    """Return ``{url: size}`` of every object under ``prefix_url`` (a folder-like prefix)."""
    store, key = _at(prefix_url)
    return {store.url(k): m.size for k, m in store.list(key).items()}


def list_ages(prefix_url: str) -> dict[str, float]:
    """Return ``{url: seconds since last written}`` under ``prefix_url``, by the store's clock."""
    store, key = _at(prefix_url)
    return {store.url(k): age for k, age in store.ages(key).items()}
