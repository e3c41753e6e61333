"""Housekeeping under a cache root folder: safe deletion, crash debris, build progress.

Deletion is two steps: rename into ``trash/`` (atomic, so nothing half-deleted is ever visible
under ``stores/`` or ``building/``), then remove the tree.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from precompute.errors import StoreError
from precompute.format.layout import MARKER_DIR, StoreLayout, open_store_info
from precompute.format.progress import samples_done
from service.cache.builders import BuildRequest
from service.cache.catalog import CacheLayout
from service.cache.keys import is_key
from service.coord.base import HeldClaim

__all__ = [
    "build_progress",
    "clean_debris",
    "discard",
    "inspect_partial",
    "progress_record",
]

TRASH_GRACE_S = 600.0


def discard(layout: CacheLayout, path: Path) -> None:
    """Delete the tree at ``path``: rename it into trash first, then remove it."""
    if not path.exists():
        return
    dest = layout.root / "trash" / f"{path.name}.{uuid.uuid4().hex}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    shutil.rmtree(dest, ignore_errors=False)


def inspect_partial(layout: CacheLayout, path: Path, request: BuildRequest) -> str:
    """Decide what to do with what a previous build of this key left at ``path``.

    Returns:
        ``"absent"`` (nothing there), ``"resume"`` (an incomplete store of the same spec and
        source: the builder may resume it), ``"complete"`` (a finished store of the same spec
        and source: publish it) or ``"wiped"`` (anything else was discarded).
    """
    if not path.exists():
        return "absent"
    try:
        info = open_store_info(path, require_complete=False)
    except (StoreError, ValueError, KeyError, TypeError):
        discard(layout, path)
        return "wiped"
    same = (
        info.spec_hash == request.spec.digest() and info.source_fingerprint == request.fingerprint
    )
    if not same:
        discard(layout, path)
        return "wiped"
    return "complete" if info.attrs.get("complete") else "resume"


def build_progress(path: Path) -> dict[str, Any] | None:
    """The progress of a build at ``path``, if any: shards and samples done, and the fraction.

    ``{"shards_done", "shards_total", "samples_done", "samples_total", "fraction"}``: samples
    count the written shards' and those the running shard tasks report
    (:mod:`precompute.format.progress`), so a build of one shard shows its progress too.
    """
    try:
        info = open_store_info(path, require_complete=False)
    except (StoreError, ValueError, KeyError, TypeError):
        return None
    markers = path / MARKER_DIR / "shards"
    done = sum(1 for n in os.listdir(markers) if n.endswith(".json")) if markers.is_dir() else 0
    return progress_record(done, info.layout, samples_done(path, info.layout))


def progress_record(shards_done: int, layout: StoreLayout, samples: int) -> dict[str, Any]:
    """The progress figures of :func:`build_progress`, whatever the root (folder or objects)."""
    total, of = layout.num_shards, layout.num_samples
    return {
        "shards_done": shards_done,
        "shards_total": total,
        "samples_done": samples,
        "samples_total": of,
        "fraction": samples / of if of else shards_done / total,
    }


def clean_debris(layout: CacheLayout, try_claim: Callable[[str], HeldClaim | None]) -> list[str]:
    """Remove what crashed processes left behind, never touching anything in use.

    Removes build directories and published-but-uncatalogued stores whose build claim
    ``try_claim(key)`` takes (their builder is dead), and leftovers in ``trash/``. Returns the
    paths removed.
    """
    removed: list[str] = []
    for folder in ("building", "stores"):
        base = layout.root / folder
        for name in sorted(os.listdir(base)) if base.is_dir() else []:
            if not is_key(name) or (folder == "stores" and layout.entry_file(name).exists()):
                continue
            if (claim := try_claim(name)) is None:
                continue  # its builder is alive
            with claim:
                orphan = folder == "building" or not layout.entry_file(name).exists()
                if orphan and (base / name).exists():
                    discard(layout, base / name)
                    removed.append(f"{folder}/{name}")
    trash = layout.root / "trash"
    stale = time.time() - TRASH_GRACE_S  # younger items may still be being deleted by a peer
    for name in sorted(os.listdir(trash)) if trash.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):
            if (trash / name).lstat().st_mtime < stale:
                shutil.rmtree(trash / name, ignore_errors=True)
                removed.append(f"trash/{name}")
    return removed
