"""The one build pipeline's shard work: plan, assemble each item, hole values.

Every store is built here: a store with fields (format v2) from its fields, a v1 store from
its profile's fields, image + label (:func:`build_fields`; the layout writes v1's arrays).
:func:`plan_field_shards` puts item ``perm[i]`` in slot ``i`` (:mod:`precompute.pipeline.plan`) and
carries each slot's item as JSON in its :class:`~precompute.pipeline.plan.ShardTask`.
:func:`run_field_samples` is the body of :func:`precompute.pipeline.shardwork.build_shard`: every
item is read, decoded, checked and placed by :func:`precompute.fields.assemble.assemble`
(which gives its kinds' companions too, ``Kind.companion_values``; a store of K offline
variants places each spatial field K times), and written into the arrays of the layout's
table by name. A hole (a skipped input) keeps every array's fill, a zero ``extent``,
``valid`` 0 (v2) and an empty key. A sample whose ``FIELD.truncated`` companion is set (an
audio file cut short, kept) is listed in the shard's ``truncated``. Nothing here names a
kind.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from precompute.errors import DecodeError
from precompute.fields import KINDS, FieldSpec, Kind, register_kind
from precompute.fields.assemble import DECODE, assemble, decoder_of, register_decoder
from precompute.fields.geometry import PLACE, register_rule, rule_of, variant_draws
from precompute.fields.spec import v1_fields
from precompute.format.layout import StoreLayout
from precompute.pipeline.plan import ShardTask, shard_items
from precompute.runtime.threads import ordered_map, settle
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.inputs import counted
from precompute.spec import AugmentPolicy, BuildSpec
from precompute.transforms.apply import SampleTransform, loaded

if TYPE_CHECKING:
    from precompute.pipeline.shardwork import ShardJob, ShardResult

__all__ = [
    "Backends",
    "backends_of",
    "build_fields",
    "ensure_backends",
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
    return [
        ShardTask(shard, start, tuple(it.key for it in picked), tuple(map(item_to_json, picked)))
        for shard, start, picked in shard_items(source.items, layout, seed, shards)
    ]


@dataclass(frozen=True)
class Backends:
    """What a job's fields need registered in every process that builds a shard.

    Attributes:
        kinds: The fields' kinds.
        decoders: ``(name, decoder)`` of the file fields' decoders.
        rules: ``(name, rule)`` of the fields' build geometry rules.
    """

    kinds: tuple[Kind, ...] = ()
    decoders: tuple[tuple[str, Any], ...] = ()
    rules: tuple[tuple[str, Any], ...] = ()


def backends_of(fields: Sequence[FieldSpec]) -> Backends:
    """The registered kinds, decoders and rules of ``fields``, checked before anything runs.

    Raises:
        SpecError: A field whose decoder or build rule no module registered (naming both).
    """
    decoders = {f.spec.decoder: decoder_of(f) for f in fields if f.spec.source == "file"}
    rules = {f.resample: rule_of(f) for f in fields}
    kinds = {f.kind: f.spec for f in fields}
    return Backends(tuple(kinds.values()), tuple(decoders.items()), tuple(rules.items()))


def ensure_backends(backends: Backends) -> None:
    """Register the kinds, decoders and rules this process lacks (a Ray worker)."""
    for kind in backends.kinds:
        if kind.name not in KINDS:
            register_kind(kind)
    for name, decoder in backends.decoders:
        if name not in DECODE:
            register_decoder(name, decoder)
    for name, rule in backends.rules:
        if name not in PLACE:
            register_rule(name, rule)


def _empty(layout: StoreLayout, n: int) -> dict[str, Any]:
    """Every array's slice of ``n`` holes: each array's fill, empty keys."""
    out: dict[str, Any] = {}
    for name, a in layout.arrays.items():
        if a.sharded:
            out[name] = np.full((n, *a.shape[1:]), a.fill, dtype=a.dtype)
    out["key"] = [""] * n
    return out


def build_fields(layout: StoreLayout, spec: BuildSpec) -> tuple[FieldSpec, ...]:
    """The fields a shard of ``layout`` is built from: its own, or v1's image + label."""
    return layout.fields or v1_fields(fill=spec.fill)


def _transform(spec: BuildSpec) -> SampleTransform | None:
    """The spec's transform, imported in this process (None without one)."""
    return None if spec.transform is None else loaded(spec.transform)


def _sample(
    item: FieldItem, fields: Sequence[FieldSpec], spec: BuildSpec, **io: Any
) -> dict[str, Any]:
    """One stored sample by array name: every field, its companions, ``extent``, ``valid``.

    ``io``: :func:`~precompute.fields.assemble.assemble`'s ``read``, ``opener``, ``variants``
    and ``transform``.
    """
    values, extent = assemble(
        item, fields, size=spec.size, mode=spec.mode, max_pixels=spec.max_pixels, **io
    )
    return {**values, "extent": extent, "valid": 1, "key": item.key}


def _variants(spec: BuildSpec, slot: int) -> Any:
    """The variant draws of store slot ``slot`` (None: one placement by ``mode``)."""
    if spec.variants == 1:
        return None
    side = spec.frame[0]  # variants are square (the spec refuses them with a WxH size)
    return variant_draws(spec.seed, slot, spec.variants, side, spec.augment or AugmentPolicy())


def run_field_samples(
    job: ShardJob,
    task: ShardTask,
    result: ShardResult,
    threads: int = 1,
    stop: threading.Event | None = None,
    on_sample: Callable[[], None] | None = None,
) -> dict[str, Any] | None:
    """Assemble ``task``'s items into the arrays of its shard; None after a ``raise`` error.

    ``threads``: the CPUs the task was given; its items are decoded on that many threads
    (:func:`~precompute.runtime.threads.ordered_map`) and taken in slot order, so the arrays,
    the first error under ``raise`` and the skipped list are those of one thread.
    ``on_sample`` is called as each sample is taken.

    Raises:
        Stopped: ``stop`` was set (the build stopped; nothing is written).
    """
    spec, reader = job.spec, job.reader
    arrays = _empty(job.layout, len(task.items))
    fields = build_fields(job.layout, spec)
    transform = _transform(spec)

    def one(j: int) -> tuple[dict[str, Any] | DecodeError, int]:
        read_bytes = [0]  # this item's: the items of a task may run on several threads

        def read(item: FieldItem, field: str) -> bytes:
            got: tuple[bytes, int] = reader.read_counted(item, field, spec.max_bytes)
            read_bytes[0] += got[1]  # a scene a worker's cache serves counts once, when read
            return got[0]

        def count(n: int) -> None:
            read_bytes[0] += n

        def opener(item: FieldItem, field: str) -> IO[bytes]:  # part of a long file (FileInput)
            return counted(reader.open_input(item, field), count)

        try:
            variants = _variants(spec, task.start + j)
            item = item_from_json(task.items[j])
            sample = _sample(
                item, fields, spec, read=read, opener=opener, variants=variants,
                transform=transform,
            )  # fmt: skip
            return sample, read_bytes[0]
        except DecodeError as exc:
            return exc, read_bytes[0]
        finally:
            settle()  # a library the sample loaded (torch) runs one thread too

    for j, (sample, nbytes) in enumerate(ordered_map(one, range(len(task.items)), threads, stop)):
        result.bytes_read += nbytes
        if on_sample is not None:  # the progress watchers see (precompute.format.progress)
            on_sample()
        if isinstance(sample, DecodeError):
            if spec.on_error == "raise":
                result.error = {"key": sample.key, "reason": sample.reason}
                return None
            result.skipped.append({"key": sample.key, "reason": sample.reason})
            continue  # a hole: every array keeps its fill
        for name, value in sample.items():
            if name in arrays:  # extent: only with a spatial field
                arrays[name][j] = value
        if any(sample[n] for n in sample if n.endswith(".truncated")):  # kept, data cut
            result.truncated.append(sample["key"])
    return arrays


def time_samples(job: ShardJob, task: ShardTask, count: int, budget_s: float) -> list[float]:
    """CPU seconds each of ``task``'s first ``count`` samples takes here (at most ``budget_s``).

    What ``--runner auto`` estimates a build's work from: the samples are decoded as a shard
    task decodes them (a bad input counts its time too), and nothing is kept or noted. CPU
    time of the process (the sample's reads run on a thread of their own), not wall time:
    other load on the machine changes it little.
    """
    spec, reader = job.spec, job.reader
    fields = build_fields(job.layout, spec)
    ensure_backends(job.backends)
    transform = _transform(spec)
    took: list[float] = []

    def read(item: FieldItem, field: str) -> bytes:
        return bytes(reader.read_counted(item, field, spec.max_bytes)[0])

    def opener(item: FieldItem, field: str) -> IO[bytes]:
        return reader.open_input(item, field)  # type: ignore[no-any-return]

    start = time.perf_counter()
    for j, text in enumerate(task.items[:count]):
        t0 = time.process_time()
        try:
            item = item_from_json(text)
            _sample(
                item,
                fields,
                spec,
                read=read,
                opener=opener,
                variants=_variants(spec, task.start + j),
                transform=transform,
            )
        except DecodeError:
            pass  # a bad input costs its time too
        took.append(time.process_time() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return took
