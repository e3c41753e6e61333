"""The two kinds of cache root: what building and unpublishing a store means on each.

:class:`Cache` runs one protocol on any cache root; a root says only how its bytes move:

* :class:`FolderRoot` (a local or mounted folder): a build writes ``building/<key>/``, which is
  renamed to ``stores/<key>/`` in one step once checked; deleting goes through ``trash/``.
* :class:`ObjectRoot` (a prefix in object storage): there is no rename, so a build writes
  ``stores/<key>/`` in place, never served before its entry is PUT; deleting deletes objects.

:func:`open_root` picks one from the byte store under the root (a remote one gets objects, and
the coordination of object storage: :mod:`service.coord`), never from the URL's spelling.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.format.layout import MARKER_DIR, open_store_info
from precompute.format.progress import samples_done
from precompute.storage.location import location
from service.cache import maintenance
from service.cache.builders import BuildRequest
from service.cache.catalog import CacheLayout, dir_size
from service.cache.objcatalog import ObjectLayout, names_under, object_call, relative
from service.coord.base import Coordinator
from service.coord.local import LocalCoordinator
from service.coord.objects import ObjectCoordinator
from service.coord.objholder import Timing

__all__ = ["CacheRoot", "FolderRoot", "ObjectRoot", "open_root"]

_UNREADABLE = (StoreError, ValueError, KeyError, TypeError)


class FolderRoot:
    """A cache root folder (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.layout = CacheLayout(root)
        self.layout.ensure()

    def coordinator(self, timing: Callable[[], Timing]) -> LocalCoordinator:
        """File locks under the root (``timing`` means nothing to the kernel's locks)."""
        return LocalCoordinator(self.layout.root)

    def lookup(self, key: str, now: float) -> Path | None:
        """Mark ``key`` used at ``now``; return its store if published."""
        store = self.layout.store(key)
        return store if self.layout.touch(key, now) and store.is_dir() else None

    def prepare(self, request: BuildRequest) -> bool:
        """Adopt or clear what a dead builder left; return whether a complete store is there."""
        key, store = request.key, self.layout.store(request.key)
        self.layout.entry_file(key).unlink(missing_ok=True)  # an entry whose store vanished
        if store.exists():  # published by a builder that died before cataloguing it:
            maintenance.discard(self.layout, request.out)  # examine it like a partial build,
            os.replace(store, request.out)  # so a complete, matching one is adopted
        return maintenance.inspect_partial(self.layout, request.out, request) == "complete"

    def place(self, request: BuildRequest) -> tuple[Path, int]:
        """Move the checked build into ``stores/<key>/`` (one rename); return it and its bytes."""
        store = self.layout.store(request.key)
        request.out.rename(store)
        return store, dir_size(store)

    def discard_build(self, request: BuildRequest) -> None:
        """Delete a build that is not what was asked for."""
        maintenance.discard(self.layout, request.out)

    def partial(self, key: str) -> bool:
        """Whether a build of ``key`` left (or is writing) a folder."""
        return self.layout.building(key).exists()

    def progress(self, key: str) -> dict[str, Any] | None:
        """Shards done of the build of ``key``."""
        return maintenance.build_progress(self.layout.building(key))

    def delete_entry(self, key: str) -> None:
        """Unpublish ``key``: nobody finds its store any more."""
        self.layout.entry_file(key).unlink(missing_ok=True)

    def delete_store(self, key: str) -> None:
        """Delete the store of an unpublished key (through ``trash/``)."""
        maintenance.discard(self.layout, self.layout.store(key))

    def clean_debris(self, coord: Coordinator) -> list[str]:
        """Delete what dead builders left and old trash; return what was removed."""
        return maintenance.clean_debris(self.layout, coord.try_claim)


class ObjectRoot:
    """A cache root prefix in object storage (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.layout = ObjectLayout(root)
        self.layout.ensure()

    def coordinator(self, timing: Callable[[], Timing]) -> ObjectCoordinator:
        """Claim and lease objects under the root; ``timing()`` gives the heartbeat timing."""
        return ObjectCoordinator(self.layout.root, timing)

    def lookup(self, key: str, now: float) -> Any:
        """Record a use of ``key`` at ``now``; return its store if published."""
        return self.layout.store(key) if self.layout.touch(key, now) else None

    def prepare(self, request: BuildRequest) -> bool:
        """Clear what a dead builder left; return whether a complete matching store is there."""
        store = self.layout.store(request.key)
        object_call("build", (store / MARKER_DIR / "build.lock").delete)  # we hold the claim
        if not object_call("list", store.list):
            return False
        try:
            info = open_store_info(request.out, require_complete=False)
            same = info.spec_hash == request.spec.digest()
            same = same and info.source_fingerprint == request.fingerprint
        except _UNREADABLE:
            same = False
        if not same:
            self.layout.wipe(store)
            return False
        return bool(info.attrs.get("complete"))  # else: the builder resumes it

    def place(self, request: BuildRequest) -> tuple[Any, int]:
        """The store was built in place; return it and its bytes."""
        return self.layout.store(request.key), self.layout.store_bytes(request.key)

    def discard_build(self, request: BuildRequest) -> None:
        """Delete a build that is not what was asked for."""
        self.layout.wipe(self.layout.store(request.key))

    def partial(self, key: str) -> bool:
        """False: a build's objects without a claim are debris (``gc`` deletes them)."""
        return False

    def progress(self, key: str) -> dict[str, Any] | None:
        """Shards and samples done of the build of ``key`` (``maintenance.build_progress``)."""
        try:
            info = open_store_info(self.layout.store(key), require_complete=False)
        except _UNREADABLE:
            return None
        markers = self.layout.store(key) / MARKER_DIR / "shards"
        done = sum(n.endswith(".json") for n in names_under(markers))
        samples = samples_done(self.layout.store(key), info.layout)
        return maintenance.progress_record(done, info.layout, samples)

    def delete_entry(self, key: str) -> None:
        """Unpublish ``key``: nobody finds its store any more."""
        object_call("unpublish", self.layout.entry_file(key).delete)

    def delete_store(self, key: str) -> None:
        """Delete the objects of an unpublished key."""
        object_call("unpublish", self.layout.access_file(key).delete)
        self.layout.wipe(self.layout.store(key))

    def clean_debris(self, coord: Coordinator) -> list[str]:
        """Delete old takeover markers, then stores nobody published whose claim is free."""
        stale_s = coord.timing().stale_s if isinstance(coord, ObjectCoordinator) else 0.0
        return self._clean_markers(stale_s) + self._clean_stores(coord)

    def _clean_markers(self, stale_s: float) -> list[str]:
        """Delete takeover markers older than ``stale_s`` by the object store's clock.

        A marker (``claims/<key>.json.takeover/<etag>``) only stops a second process that read
        the same dead claim from taking it over as well; once older than ``stale_s`` no such
        reader is still waiting to act on its read (one stalled as long is as dead as a
        stalled holder).
        """
        removed, root, claims = [], self.layout.root, self.layout.root / "claims"
        for found, age in sorted(object_call("list", claims.store.ages, claims.key).items()):
            if ".json.takeover/" in found and age > stale_s:
                object_call("delete", claims.store.delete, found)
                removed.append(relative(root, found))
        return removed

    def _clean_stores(self, coord: Coordinator) -> list[str]:
        removed = []
        published = set(self.layout.catalog_keys())
        for key in self.layout.store_keys():
            if key in published or (claim := coord.try_claim(key)) is None:
                continue
            with claim:
                if self.layout.read_entry(key) is None:
                    self.layout.wipe(self.layout.store(key))
                    removed.append(f"stores/{key}")
        return removed


CacheRoot = FolderRoot | ObjectRoot


def open_root(root: str | Path) -> CacheRoot:
    """The root of ``root``: objects when its byte store is remote, else a folder."""
    return ObjectRoot(root) if location(str(root)).store.remote else FolderRoot(root)
