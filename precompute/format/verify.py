"""Check a store end to end: metadata, every shard file, markers, every chunk, labels and keys.

:func:`verify_store` first validates the group and array metadata against the layout (a cut
``zarr.json`` or a key of a wrong type is one problem naming the file and the key). Then, one
shard at a time, it checks that every shard file exists at its exact size and matches the size
and sha256 its shard marker recorded at build time (a whole shard swapped for another one is
self-consistent chunk by chunk; only this catches it), and reads the shard through Zarr (so
each inner chunk's and each shard index's crc32c is checked). It returns a list of problems,
each one line naming the file or shard. A store with fields (format v2) has its values checked
by :mod:`precompute.format.verifyfields` (the kinds' rules, ``valid``, holes). An empty list means
the store is sound.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from precompute.errors import StoreError
from precompute.format.layout import HOLE_LABEL, StoreInfo, open_store_info, shard_marker_path
from precompute.format.storecheck import (
    file_digest,
    shard_file,
    shard_file_problems,
    store_sizes,
)
from precompute.format.verifyfields import field_problems, valid_mask
from precompute.storage.location import Location, open_array

__all__ = ["verify_store"]


def _read_marker(info: StoreInfo, shard: int) -> tuple[Mapping[str, Any] | None, list[str]]:
    path = shard_marker_path(info.path, shard)
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        return None, [f"shard {shard}: marker {path} missing or unreadable ({exc})"]
    if not isinstance(marker, Mapping):
        return None, [f"shard {shard}: marker {path} is not a JSON object"]
    return marker, []


def _differs(recorded: Any, now: Mapping[str, Any]) -> str:
    if isinstance(recorded, Mapping) and recorded.get("size") != now["size"]:
        return f"{now['size']} bytes, not the {recorded.get('size')} of"
    return "its sha256 differs from"


def _check_digests(info: StoreInfo, shard: int, marker: Mapping[str, Any]) -> list[str]:
    """Compare each shard file with the size and sha256 its marker recorded (if it did)."""
    files = marker.get("files")
    if files is None:  # a store written before markers recorded digests: nothing to compare
        return []
    if not isinstance(files, Mapping):
        return [
            f"shard {shard}: marker {shard_marker_path(info.path, shard)}: key 'files' is "
            "not a mapping"
        ]
    problems = []
    for name in info.layout.arrays:
        path = shard_file(info.path, info.layout, name, shard)
        try:
            digest = file_digest(path)
        except OSError as exc:  # vanished since it was checked
            problems.append(f"shard {shard}: {name}: shard file {path} unreadable ({exc})")
            continue
        if files.get(name) != digest:
            problems.append(
                f"shard {shard}: {name}: shard file {path} is not the file its build wrote "
                f"({_differs(files.get(name), digest)} its marker's; replaced or edited)"
            )
    return problems


def _check_marker(
    info: StoreInfo, shard: int, marker: Mapping[str, Any], stored: np.ndarray
) -> list[str]:
    start, stop = info.layout.shard_range(shard)
    problems = []
    if (marker.get("start"), marker.get("stop")) != (start, stop):
        problems.append(
            f"shard {shard}: marker range {marker.get('start')}..{marker.get('stop')}"
            f" != layout range {start}..{stop}"
        )
    valid = int(np.count_nonzero(stored))
    if marker.get("num_valid") != valid:
        problems.append(
            f"shard {shard}: marker says {marker.get('num_valid')} valid samples, "
            f"the {'valid' if info.layout.fields else 'label'} array has {valid}"
        )
    return problems


def _check_arrays(info: StoreInfo, shard: int) -> tuple[list[str], np.ndarray | None]:
    start, stop = info.layout.shard_range(shard)
    data: dict[str, np.ndarray] = {}
    for name in info.layout.arrays:
        try:
            data[name] = np.asarray(open_array(info.path / name)[start:stop])
        except Exception as exc:  # zarr raises ValueError on a checksum mismatch, and others
            path = shard_file(info.path, info.layout, name, shard)
            return [
                f"shard {shard}: {name}: unreadable ({path}: {type(exc).__name__}: {exc})"
            ], None
    if info.layout.fields:  # v2: the kinds' checks, valid and holes
        return field_problems(shard, info.layout, data), valid_mask(data)
    label, key = data["label"], data["key"]
    problems = []
    holes = label == HOLE_LABEL
    if np.any(holes != (key == "")):
        problems.append(f"shard {shard}: holes (label -1) and empty keys disagree")
    if np.any(holes) and np.any(data["image"][holes]):
        problems.append(f"shard {shard}: a hole has non-zero pixels")
    return problems, ~holes


def _check_shard(
    info: StoreInfo, shard: int, sizes: Mapping[str, int] | None = None
) -> tuple[list[str], int]:
    """Return the problems of ``shard`` and its number of valid samples."""
    problems = list(shard_file_problems(info.path, info.layout, shard, None, sizes))
    marker, found = _read_marker(info, shard)
    problems += found
    if problems or marker is None:
        return problems, 0
    problems, stored = _check_arrays(info, shard)
    if stored is None:
        return problems, 0
    if not problems:  # every chunk sound: is each file still the one its build wrote?
        problems = _check_digests(info, shard, marker)
    return problems + _check_marker(info, shard, marker, stored), int(np.count_nonzero(stored))


def verify_store(
    path: str | Path | Location, on_shard: Callable[[int], None] | None = None
) -> list[str]:
    """Return the problems found in the store at ``path`` (empty: the store is sound).

    Args:
        path: The store folder or object-store URL.
        on_shard: Called with each shard index after it is checked (for progress bars).
    """
    try:
        info = open_store_info(path)  # checks each array's metadata too
    except StoreError as exc:
        return [str(exc)]
    problems: list[str] = []
    valid = 0
    try:  # every file's size from one listing, not a stat or HEAD per file
        sizes = store_sizes(info.path)
    except OSError as exc:
        return [str(exc)]
    for shard in range(info.layout.num_shards):
        found, shard_valid = _check_shard(info, shard, sizes)
        problems += found
        valid += shard_valid
        if on_shard is not None:
            on_shard(shard)
    if not problems and valid != info.num_valid:
        problems.append(f"store attributes say {info.num_valid} valid samples, arrays hold {valid}")
    return problems
