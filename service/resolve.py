"""Resolve a store reference for a loader: a cache key or (source, spec) -> (path, lease).

``StoreLoader`` calls :func:`resolve` when given something that is not a store path, keeps the
returned :class:`~service.coord.lease.Lease` for as long as it reads the store, and releases it when
closed. While the lease is held, the store cannot be evicted or removed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from precompute.errors import PrecomputeError
from precompute.format.layout import open_store_info
from precompute.pipeline.check import kinship
from precompute.storage.location import is_url
from service.cache.catalog import CacheLayout
from service.cache.store import Cache, StoreLease, StoreRef
from service.errors import ServiceError

__all__ = ["CACHE_ENV", "cached_stores", "default_cache_root", "resolve"]

CACHE_ENV = "NOSTALL_CACHE"


def default_cache_root() -> Path | str:
    """Return ``$NOSTALL_CACHE`` (a folder or an ``s3://`` URL), else ``~/.cache/nostall``."""
    env = os.environ.get(CACHE_ENV)
    if env and is_url(env):
        return env
    return Path(env).expanduser() if env else Path.home() / ".cache" / "nostall"


def cached_stores(src: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The stores the default cache holds for ``src``'s source root or a sibling, with reports.

    What ``precompute build`` compares its learned classes with (the ``nostall.cached_stores``
    entry point; :func:`precompute.pipeline.check.warn_class_shifts`). Read only: nothing is
    created and no store is marked used. A cache root that does not exist holds none, and one in
    object storage is not listed on every build (the cache's own builds compare it).
    """
    root = default_cache_root()
    if isinstance(root, str):
        return []
    layout = CacheLayout(root)
    catalog = layout.root / "catalog"
    if not catalog.is_dir():
        return []
    found = []
    for file in sorted(catalog.glob("*.json")):
        try:
            entry = layout.read_entry(file.stem)
            if entry is None or kinship(src, entry.source) is None:  # another dataset
                continue
            found.append((str(entry.path), open_store_info(entry.path).report))
        except (ServiceError, PrecomputeError, OSError):  # a broken entry or store: not compared
            continue
    return found


def _as_ref(ref: StoreRef | Mapping[str, Any]) -> StoreRef:
    if isinstance(ref, Mapping):
        missing = {"source", "spec"} - set(ref)
        if missing:
            raise ValueError(
                f"a store reference mapping needs 'source' and 'spec'; missing "
                f"{sorted(missing)} in {dict(ref)!r}"
            )
        return (ref["source"], ref["spec"])
    if isinstance(ref, str) or (isinstance(ref, tuple) and len(ref) == 2):
        return ref
    raise TypeError(f"a store reference is a cache key, (source, spec) or a mapping; got {ref!r}")


def resolve(
    ref: StoreRef | Mapping[str, Any],
    *,
    cache_root: str | Path | None = None,
    cache: Cache | None = None,
) -> tuple[Path, StoreLease]:
    """Return the store path of ``ref`` and a held lease on it, building it if needed.

    Args:
        ref: A cache key (64 hex digits), a ``(source, spec)`` pair, or a mapping with
            ``source`` and ``spec``; ``spec`` is a ``BuildSpec`` or its dict.
        cache_root: Cache root; defaults to :func:`default_cache_root`.
        cache: An existing cache to use instead of opening ``cache_root``.

    Returns:
        ``(path, lease)``; call ``lease.release()`` (or use it as a context manager) when done.
        With a cache root in object storage, ``path`` is a ``Location`` whose ``str()`` is the URL.

    Raises:
        CacheKeyError: A key that is not in the cache.
        SpecError, SourceNotAllowedError, BuildFailedError: As :meth:`Cache.get_or_build`.
    """
    if cache is None:
        cache = Cache(cache_root if cache_root is not None else default_cache_root())
    lease = cache.lease(_as_ref(ref))
    return lease.path, lease
