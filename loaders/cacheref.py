"""Cache references: a store named by a cache key or by ``(source, spec)`` instead of a path.

``loaders`` imports nothing from the cache. A package that can resolve such a reference (the
``service`` package of this distribution) registers a function under the
``nostall.store_resolvers`` entry points; it is imported only when a reference is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from loaders.errors import StoreOpenError
from precompute.storage.location import Location, store_path

__all__ = ["RESOLVERS", "Held", "is_cache_ref", "resolve_cache_ref"]

RESOLVERS = "nostall.store_resolvers"


class Held(Protocol):
    """What a resolver hands back with the path: a hold on the store, released when done."""

    def release(self) -> None:
        """Release the hold (idempotent)."""


def is_cache_ref(store: object) -> bool:
    """True for a cache key (64 hex digits, not an existing path), (source, spec) or a mapping."""
    if isinstance(store, (tuple, Mapping)):
        return True
    return (
        isinstance(store, str)
        and len(store) == 64
        and not Path(store).exists()
        and all(c in "0123456789abcdef" for c in store)
    )


def resolve_cache_ref(ref: object, **options: Any) -> tuple[Path | str, Held]:
    """Return ``(store path, hold)`` for ``ref`` from the installed resolver.

    The path is the store's URL when the store lies in object storage (a cache there).

    Args:
        ref: A cache key, a ``(source, spec)`` pair or a ``{"source", "spec"}`` mapping.
        **options: Passed to the resolver (``cache_root``, ``cache``).

    Raises:
        StoreOpenError: No resolver is installed.
    """
    found = list(entry_points(group=RESOLVERS))
    if not found:
        raise StoreOpenError(
            repr(ref),
            f"a cache reference, but no store resolver is installed (the nostall service "
            f"package registers one as a {RESOLVERS!r} entry point): pass a store path",
        )
    path, held = found[0].load()(ref, **options)
    where = store_path(path)
    return (str(where) if isinstance(where, Location) else where), held
