"""Record a manifest's ``split`` column with the store a build writes (before it is published).

The build lists the source with each item's split (:func:`precompute.splits.manifest.source_splits`)
and, once every shard is written and before the completion marker, writes the slots' parts
(slot ``s`` holds item ``perm[s]``: :func:`precompute.pipeline.plan.slot_permutation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from precompute.pipeline.plan import slot_permutation
from precompute.splits.assign import NONE
from precompute.splits.manifest import SPLIT_COLUMN
from precompute.splits.record import RecordedSplits, write_splits
from precompute.storage.location import Location

__all__ = ["record_source_splits", "slot_parts"]


def slot_parts(splits: Sequence[str], seed: int) -> RecordedSplits:
    """The parts of the store's slots, from each source item's split (``""``: none)."""
    names = tuple(sorted(set(splits) - {""}))
    index = {name: i for i, name in enumerate(names)}
    by_item = np.array([index.get(s, NONE) for s in splits], np.uint8)
    parts = by_item[slot_permutation(seed, len(splits))]
    return RecordedSplits(names, parts, {"column": SPLIT_COLUMN})


def record_source_splits(root: str | Path | Location, splits: Sequence[str], seed: int) -> bool:
    """Write the store's split from its items' ``splits`` (nothing without); True if written."""
    if not splits:
        return False
    write_splits(root, slot_parts(splits, seed))
    return True
