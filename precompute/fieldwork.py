"""The shard work of a store with fields (format v2): plan, assemble each item, hole values.

:func:`plan_field_shards` puts item ``perm[i]`` in slot ``i`` (the v1 plan's permutation) and
carries each slot's item as JSON in its :class:`~precompute.plan.ShardTask`.
:func:`run_field_samples` is the v2 body of :func:`precompute.shardwork.build_shard`: every
item is read, decoded, checked and placed by :func:`precompute.fields.assemble.assemble`
(which gives its kinds' companions too, ``Kind.companion_values``), and written into the
arrays of the layout's table by name. A hole (a skipped input) keeps every array's fill, a
zero ``extent``, ``valid`` 0 and an empty key. Nothing here names a kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from precompute.errors import DecodeError
from precompute.fields import KINDS, FieldSpec, Kind, register_kind
from precompute.fields.assemble import assemble
from precompute.fieldsources import FieldItem, FieldSource
from precompute.format import StoreLayout
from precompute.plan import ShardTask, slot_permutation

if TYPE_CHECKING:
    from precompute.shardwork import ShardJob, ShardResult

__all__ = [
    "ensure_kinds",
    "item_from_json",
    "item_to_json",
    "plan_field_shards",
    "run_field_samples",
]


def item_to_json(item: FieldItem) -> str:
    """One item as JSON (a Ray Data cell)."""
    return json.dumps({"key": item.key, "files": item.files, "values": item.values})


def item_from_json(text: str) -> FieldItem:
    """The item :func:`item_to_json` wrote (inline values come back as lists)."""
    doc = json.loads(text)
    files = tuple((str(f), str(p)) for f, p in doc["files"])
    return FieldItem(str(doc["key"]), files, tuple((str(f), v) for f, v in doc["values"]))


def plan_field_shards(
    source: FieldSource, layout: StoreLayout, seed: int, shards: list[int] | None = None
) -> list[ShardTask]:
    """Return the tasks of ``shards`` (default: all) in shard order (the v1 permutation)."""
    perm = slot_permutation(seed, len(source.items))
    tasks = []
    for shard in range(layout.num_shards) if shards is None else sorted(shards):
        start, stop = layout.shard_range(shard)
        picked = [source.items[i] for i in perm[start:stop]]
        items = tuple(item_to_json(it) for it in picked)
        tasks.append(ShardTask(shard, start, tuple(it.key for it in picked), (), items))
    return tasks


def ensure_kinds(kinds: Sequence[Kind]) -> None:
    """Register the kinds a job's fields use that this process lacks (a Ray worker)."""
    for kind in kinds:
        if kind.name not in KINDS:
            register_kind(kind)


def _empty(layout: StoreLayout, n: int) -> dict[str, Any]:
    """Every array's slice of ``n`` holes: each array's fill, empty keys."""
    out: dict[str, Any] = {}
    for name, a in layout.arrays.items():
        if a.sharded:
            out[name] = np.full((n, *a.shape[1:]), a.fill, dtype=a.dtype)
    out["key"] = [""] * n
    return out


def _sample(item: FieldItem, fields: Sequence[FieldSpec], read: Any, spec: Any) -> dict[str, Any]:
    """One stored sample by array name: every field, its companions, ``extent``, ``valid``."""
    values, extent = assemble(item, fields, read, spec.size, spec.mode, spec.max_pixels)
    return {**values, "extent": extent, "valid": 1, "key": item.key}


def run_field_samples(job: ShardJob, task: ShardTask, result: ShardResult) -> dict[str, Any] | None:
    """Assemble ``task``'s items into the arrays of its shard; None after a ``raise`` error."""
    spec, reader = job.spec, job.reader
    arrays = _empty(job.layout, len(task.items))

    def read(item: FieldItem, field: str) -> bytes:
        data: bytes = reader.read_bytes(item, field, spec.max_bytes)
        result.bytes_read += len(data)
        return data

    for j, text in enumerate(task.items):
        try:
            sample = _sample(item_from_json(text), job.layout.fields, read, spec)
        except DecodeError as exc:
            if spec.on_error == "raise":
                result.error = {"key": exc.key, "reason": exc.reason}
                return None
            result.skipped.append({"key": exc.key, "reason": exc.reason})
            continue  # a hole: every array keeps its fill
        for name, value in sample.items():
            if name in arrays:  # extent: only with a spatial field
                arrays[name][j] = value
    return arrays
