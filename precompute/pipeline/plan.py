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

from precompute.format.layout import StoreLayout

__all__ = ["ShardTask", "shard_items", "slot_permutation"]

T = TypeVar("T")

_PLAN_STREAM = 0x5A4D  # separates the plan's random stream from augmentation streams


@dataclass(frozen=True)
class ShardTask:
    """The work of one shard: its index, first slot, and each slot's key and item (JSON).

    ``items`` holds each slot's :class:`~precompute.sources.fields.FieldItem` as JSON
    (:mod:`precompute.pipeline.fieldwork`): what a Ray Data row carries to the task.
    """

    shard: int
    start: int
    keys: tuple[str, ...]
    items: tuple[str, ...] = ()

    def to_row(self) -> dict[str, object]:
        """Return the task as a Ray Data row."""
        return {
            "shard": self.shard,
            "start": self.start,
            "keys": list(self.keys),
            "items": list(self.items),
        }

    @classmethod
    def from_row(cls, row: dict[str, object]) -> ShardTask:
        """Parse a row made by :meth:`to_row`."""
        keys = tuple(str(k) for k in row["keys"])  # type: ignore[attr-defined]
        items = tuple(str(v) for v in row.get("items", ()))  # type: ignore[attr-defined]
        return cls(int(row["shard"]), int(row["start"]), keys, items)  # type: ignore[call-overload]


def slot_permutation(seed: int, num_items: int) -> np.ndarray:
    """Return ``perm`` with ``perm[slot] = source index`` (a pure function of the seed)."""
    return np.random.default_rng([seed, _PLAN_STREAM]).permutation(num_items)


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
