"""Check a store end to end: completeness, markers, every chunk's crc32c, label/key consistency.

:func:`verify_store` reads every shard of every array through Zarr (so each inner chunk's and
each shard index's crc32c is checked), one shard at a time, and returns a list of problems, each
naming the shard. An empty list means the store is sound.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr

from precompute.errors import StoreError
from precompute.format import FIELDS, HOLE_LABEL, StoreInfo, open_store_info, shard_marker_path

__all__ = ["verify_store"]


def _check_files(info: StoreInfo, shard: int) -> list[str]:
    problems = []
    for name in FIELDS:
        arr = zarr.open_array(str(info.path / name), mode="r")
        coords = (shard,) + (0,) * (arr.ndim - 1)
        if not (info.path / name / arr.metadata.encode_chunk_key(coords)).is_file():
            problems.append(f"shard {shard}: {name}: shard file is missing")
    return problems


def _check_marker(info: StoreInfo, shard: int, label: np.ndarray) -> list[str]:
    start, stop = info.layout.shard_range(shard)
    try:
        marker = json.loads(shard_marker_path(info.path, shard).read_text())
    except (OSError, ValueError) as exc:
        return [f"shard {shard}: marker missing or unreadable ({exc})"]
    problems = []
    if (marker.get("start"), marker.get("stop")) != (start, stop):
        problems.append(
            f"shard {shard}: marker range {marker.get('start')}..{marker.get('stop')}"
            f" != layout range {start}..{stop}"
        )
    valid = int(np.count_nonzero(label != HOLE_LABEL))
    if marker.get("num_valid") != valid:
        problems.append(
            f"shard {shard}: marker says {marker.get('num_valid')} valid samples, "
            f"the label array has {valid}"
        )
    return problems


def _check_arrays(info: StoreInfo, shard: int) -> tuple[list[str], np.ndarray | None]:
    start, stop = info.layout.shard_range(shard)
    data: dict[str, np.ndarray] = {}
    for name in FIELDS:
        try:
            data[name] = np.asarray(zarr.open_array(str(info.path / name), mode="r")[start:stop])
        except Exception as exc:  # zarr raises ValueError on a checksum mismatch, and others
            return [f"shard {shard}: {name}: unreadable ({type(exc).__name__}: {exc})"], None
    label, key = data["label"], data["key"]
    problems = []
    holes = label == HOLE_LABEL
    if np.any(holes != (key == "")):
        problems.append(f"shard {shard}: holes (label -1) and empty keys disagree")
    if np.any(holes) and np.any(data["image"][holes]):
        problems.append(f"shard {shard}: a hole has non-zero pixels")
    return problems, label


def verify_store(path: str | Path, on_shard: Callable[[int], None] | None = None) -> list[str]:
    """Return the problems found in the store at ``path`` (empty: the store is sound).

    Args:
        path: The store folder.
        on_shard: Called with each shard index after it is checked (for progress bars).
    """
    try:
        info = open_store_info(path)
    except StoreError as exc:
        return [str(exc)]
    problems: list[str] = []
    valid = 0
    for shard in range(info.layout.num_shards):
        found = _check_files(info, shard)
        if not found:
            found, label = _check_arrays(info, shard)
            if label is not None:
                found += _check_marker(info, shard, label)
                valid += int(np.count_nonzero(label != HOLE_LABEL))
        problems += found
        if on_shard is not None:
            on_shard(shard)
    if not problems and valid != info.num_valid:
        problems.append(f"store attributes say {info.num_valid} valid samples, arrays hold {valid}")
    return problems
