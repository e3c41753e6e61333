"""The build plan: which source item goes into which store slot, shard by shard (pure).

Slot ``i`` holds source item ``perm[i]`` where ``perm`` is a permutation of the sorted source
list drawn from the build seed alone, so classes are spread over all shards and the same spec
and source always give the same store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from precompute.format import StoreLayout
from precompute.sources import Source

__all__ = ["ShardTask", "plan_shards", "shard_items", "slot_permutation"]

T = TypeVar("T")

_PLAN_STREAM = 0x5A4D  # separates the plan's random stream from augmentation streams


@dataclass(frozen=True)
class ShardTask:
    """The work of one shard: its index, first slot, and the ``(key, label)`` of each slot.

    A store with fields (v2) has no labels; ``items`` holds each slot's item as JSON
    (:mod:`precompute.fieldwork`).
    """

    shard: int
    start: int
    keys: tuple[str, ...]
    labels: tuple[int, ...]
    items: tuple[str, ...] = ()

    def to_row(self) -> dict[str, object]:
        """Return the task as a Ray Data row."""
        row: dict[str, object] = {
            "shard": self.shard,
            "start": self.start,
            "keys": list(self.keys),
            "labels": list(self.labels),
        }
        if self.items:
            row["items"] = list(self.items)
        return row

    @classmethod
    def from_row(cls, row: dict[str, object]) -> ShardTask:
        """Parse a row made by :meth:`to_row`."""
        keys = tuple(str(k) for k in row["keys"])  # type: ignore[attr-defined]
        labels = tuple(int(v) for v in row["labels"])  # type: ignore[attr-defined]
        items = tuple(str(v) for v in row.get("items", ()))  # type: ignore[attr-defined]
        return cls(int(row["shard"]), int(row["start"]), keys, labels, items)  # type: ignore[call-overload]


def slot_permutation(seed: int, num_items: int) -> np.ndarray:
    """Return ``perm`` with ``perm[slot] = source index`` (a pure function of the seed)."""
    return np.random.default_rng([seed, _PLAN_STREAM]).permutation(num_items)


def plan_shards(
    source: Source, layout: StoreLayout, seed: int, shards: list[int] | None = None
) -> list[ShardTask]:
    """Return the tasks of ``shards`` (default: all) in shard order."""
    return [
        ShardTask(shard, start, tuple(k for k, _ in picked), tuple(lab for _, lab in picked))
        for shard, start, picked in shard_items(source.items, layout, seed, shards)
    ]


def shard_items(
    items: Sequence[T], layout: StoreLayout, seed: int, shards: list[int] | None = None
) -> Iterator[tuple[int, int, list[T]]]:
    """Yield ``(shard, first slot, its items in slot order)`` for ``shards`` (default: all).

    The item of slot ``s`` is ``items[slot_permutation(seed, len(items))[s]]``; shards come
    in ascending order.
    """
    perm = slot_permutation(seed, len(items))
    for shard in range(layout.num_shards) if shards is None else sorted(shards):
        start, stop = layout.shard_range(shard)
        yield shard, start, [items[i] for i in perm[start:stop]]
