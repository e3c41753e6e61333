"""Which saved states a loader resumes, and the world an epoch resumed elsewhere keeps.

A state records the world size and batch size of the loader that saved it, and those its
epoch was cut for (``order_world``, ``order_batch``: the same, unless that epoch was itself
resumed from another world size). A state at an epoch's start resumes on any world size (the
epoch is cut for the new one). A state mid-epoch resumes on another world size when the global
batch is kept (``world_size * batch_size`` equal): the epoch keeps its partitions
(:mod:`loaders.selection.elastic`); otherwise it is refused, saying which sizes resume it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loaders.errors import LoaderError

__all__ = ["ELASTIC_KEYS", "PLAIN_DEFAULTS", "resumed_layout", "saved_layout"]

ELASTIC_KEYS = ("world_size", "batch_size", "order_world", "order_batch")
# keys a state saved before they existed lacks, and the value they had then
PLAIN_DEFAULTS = {"selection": "all"}


def saved_layout(state: Mapping[str, Any]) -> tuple[int, int]:
    """``(world size, batch size)`` the saved epoch was cut for."""
    world = state.get("order_world", state.get("world_size"))
    batch = state.get("order_batch", state.get("batch_size"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (world, batch)):
        raise LoaderError(
            f"state world size and batch size must be integers >= 1, got {world!r}, {batch!r}"
        )
    return int(world), int(batch)


def _sizes(whole: int) -> str:
    pairs = [f"{w} x {whole // w}" for w in range(1, whole + 1) if whole % w == 0]
    return ", ".join(pairs[:12]) + (", ..." if len(pairs) > 12 else "")


def resumed_layout(
    state: Mapping[str, Any], batch: int, world_size: int, batch_size: int
) -> tuple[int, int] | None:
    """The layout the saved epoch keeps on this loader (None: its own).

    Raises:
        LoaderError: Mid-epoch on another world size without the global batch kept, naming
            the batch size that keeps it here, or the world sizes that can.
    """
    parts, part_batch = saved_layout(state)
    if batch == 0 or (parts, part_batch) == (world_size, batch_size):
        return None
    whole = parts * part_batch
    if world_size * batch_size == whole:
        return parts, part_batch
    if whole % world_size == 0:
        advice = f"at world size {world_size}, batch_size={whole // world_size} keeps it"
    else:
        advice = f"{world_size} ranks cannot share it; world sizes x batch sizes that can: "
        advice += _sizes(whole)
    raise LoaderError(
        f"state saved mid-epoch ({batch} batches of epoch {state.get('epoch')} served) on "
        f"{parts} ranks of batch_size {part_batch}, a global batch of {whole}; this loader's "
        f"is {world_size} x {batch_size} = {world_size * batch_size}. The rest of the epoch "
        f"resumes with the global batch kept: {advice}"
    )
