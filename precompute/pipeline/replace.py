"""``--replace``: delete a nostall store of another spec or source at ``--out``, on purpose.

A build into an ``--out`` that holds another store is refused (``StoreMismatchError``): a
half-built store whose bad inputs were fixed since differs in its source fingerprint, and a
store of other options in its spec hash. With ``replace`` the build (holding the build lock)
deletes that store first, and only when it is one:

- the folder (or object prefix) must hold a nostall store's group metadata (``zarr.json`` with
  the ``nostall`` attribute); anything else is refused by the output checks, never deleted;
- every entry beside it must be the store's own: its arrays (folders holding a Zarr array's
  ``zarr.json``) and ``_nostall/``; a file of anyone else's stops the replacement before
  anything is deleted;
- the arrays and markers go first, the group metadata last (the build lock is kept): a
  replacement cut short leaves a store that a second ``--replace`` finishes removing.

Every delete goes through the storage layer, so a store in object storage is replaced the same
way (on a local folder, the emptied sub-folders are removed too).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from precompute.errors import StoreError
from precompute.format.layout import MARKER_DIR, StoreLayout, _read_group_attrs
from precompute.pipeline.writer import mismatch
from precompute.spec import BuildSpec
from precompute.storage.location import Location, location

__all__ = ["replace_other"]

_LOCK = "build.lock"  # in MARKER_DIR: held by the build that replaces
# what the attribute in which a store differs says about it
_WHAT = {
    "spec_hash": "spec",
    "source_fingerprint": "source (or source files)",
    "layout": "layout",
    "format": "format",
    "version": "format version",
}


def replace_other(
    root: str | Path | Location, spec: BuildSpec, layout: StoreLayout, fingerprint: str
) -> str | None:
    """Delete the store at ``root`` if it is another spec's or source's; say what differed.

    What differed: ``spec``, ``source (or source files)``, ``layout``, ... None when there is
    nothing to replace: no store, or a store of this very build (complete: nothing to do;
    partial: it resumes). The caller holds the build lock.

    Raises:
        StoreError: ``root`` holds a ``zarr.json`` that is no nostall store's, or entries that
            are not the store's (nothing is deleted then).
    """
    where = location(root)
    if not (where / "zarr.json").exists():
        return None
    differs = mismatch(_read_group_attrs(where), spec, layout, fingerprint)
    if differs is None:
        return None
    _check_own(where)
    lock = (where / MARKER_DIR / _LOCK).key
    meta = (where / "zarr.json").key
    for key in where.list():
        if key not in (lock, meta):
            where.store.delete(key)
    where.store.delete(meta)  # the group last: until then a --replace can finish the job
    if where.local:
        _prune(where.path())
    return _WHAT.get(differs, differs)


def _is_array(where: Location) -> bool:
    """Whether ``where`` holds a Zarr v3 array (its ``zarr.json`` says so)."""
    try:
        doc = json.loads((where / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "array"


def _check_own(where: Location) -> None:
    """Every entry of the store folder is the store's: arrays, ``zarr.json``, ``_nostall/``."""
    for name in where.store.list_dir(where.key):
        if name in ("zarr.json", MARKER_DIR) or _is_array(where / name):
            continue
        raise StoreError(
            f"{where}: holds {where / name}, which is not part of its store; --replace deletes "
            "a nostall store only: move it out first"
        )


def _prune(folder: Path) -> None:
    """Remove the emptied sub-folders of a local store (its root and ``_nostall/`` stay)."""
    for path, dirs, _ in os.walk(folder, topdown=False):
        for name in dirs:
            sub = Path(path) / name
            if sub != folder / MARKER_DIR and not sub.is_symlink():
                try:
                    sub.rmdir()
                except OSError:  # not empty: a symlinked folder's link, left as it is
                    continue
