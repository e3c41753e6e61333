"""Which saved states a loader resumes, and the world an epoch resumed elsewhere keeps.

:func:`check_state` refuses a state of other settings, samples or data, naming each.

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

__all__ = ["ELASTIC_KEYS", "PLAIN_DEFAULTS", "check_state", "resumed_layout", "saved_layout"]

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


def check_state(state: Mapping[str, Any], mine: Mapping[str, Any]) -> None:
    """Refuse a saved loader state whose settings differ from ``mine`` (the keys of ``mine``).

    ``rank`` is not among them: ranks step together, so every rank is at the same epoch and
    batch, and a checkpoint written by rank 0 alone resumes every rank. Nor are the world size
    and batch size: :func:`loaders.selection.resume.resumed_layout` decides those. A key a
    state saved before it existed lacks has its value of then (``selection``: every sample).

    Raises:
        LoaderError: Naming every differing setting, (saved, current).
    """
    diff = {
        k: (state.get(k, PLAIN_DEFAULTS.get(k)), v)
        for k, v in mine.items()
        if state.get(k, PLAIN_DEFAULTS.get(k)) != v
    }
    if not diff:
        return
    hint = ""
    if "spec_hash" in diff and "source_fingerprint" in state:
        hint = "; saved by a loader of a raw source (JpegLoader), not of a store"
    elif "source_fingerprint" in diff and "spec_hash" in state:
        hint = "; saved by a loader of a store, not of this raw source"
    elif "selection" in diff:
        hint = (
            "; saved by a loader of other samples or weights (subset, split, weights, "
            "balance, mixture): make it with the same ones"
        )
    elif "order" in diff:
        hint = (
            "; saved by a nostall whose sample order differs: start the epoch afresh with "
            "set_epoch() instead"
        )
    raise LoaderError(f"state does not match this loader (saved, current): {diff}{hint}")
