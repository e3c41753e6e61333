"""Build one shard: read, decode and transform its samples, then write it (no Ray here).

:func:`build_shard` is what each Ray task runs (or the sequential runner). Every store is
built by the one field pipeline, :func:`precompute.pipeline.fieldwork.run_field_samples` (a v1 store
from its image + label profile). Bad inputs follow the spec's ``on_error`` policy: ``skip``
leaves a hole (every array's fill: label -1 in v1, zero pixels, an empty key, ``valid`` 0 in
v2) and records ``(key, reason)`` in the shard marker; ``raise`` returns the failure as a
value (the shard is not written) so the driver can abort naming the file.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from precompute.arrays.bandstats import shard_band_stats
from precompute.format.classcounts import shard_class_counts
from precompute.format.layout import StoreLayout
from precompute.format.progress import SampleProgress
from precompute.notes import collecting
from precompute.pipeline.fieldwork import Backends, ensure_backends, run_field_samples
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.writer import num_valid, write_shard
from precompute.runtime.threads import one_thread_pools
from precompute.spec import BuildSpec

__all__ = ["ShardJob", "ShardResult", "build_shard"]


@dataclass(frozen=True)
class ShardJob:
    """What every shard task shares: the output, its layout, the spec and a reader.

    ``backends``: the kinds, decoders and build rules of the layout's fields, registered in a
    worker that lacks one (registered at run time in the driver). ``check``: decode and check
    every sample, write nothing (``precompute check``: ``out`` names the source).
    """

    out: str
    layout: StoreLayout
    spec: BuildSpec
    reader: Any  # a FieldSource, item list dropped (locate/read_counted/open_input)
    backends: Backends = field(default_factory=Backends)
    check: bool = False


@dataclass
class ShardResult:
    """The outcome of one shard task (errors are values, not exceptions)."""

    shard: int
    num_valid: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    skipped: list[dict[str, str]] = field(default_factory=list)
    error: dict[str, str] | None = None
    truncated: list[str] = field(default_factory=list)  # keys kept with their data cut
    notes: dict[str, list[str]] = field(default_factory=dict)  # a check's (a build: the marker)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dict(self.__dict__)


def build_shard(
    job: ShardJob, task: ShardTask, cpus: int = 1, stop: threading.Event | None = None
) -> ShardResult:
    """Decode and write ``task``'s shard; return its result (``error`` set under ``raise``).

    ``cpus``: the CPUs the task was given: its samples are decoded on that many threads, and
    every native thread pool of the process runs one thread meanwhile
    (:mod:`precompute.runtime.threads`).

    Raises:
        Stopped: ``stop`` was set before the shard was decoded (nothing is written).
    """
    t0 = time.perf_counter()
    result = ShardResult(task.shard)
    ensure_backends(job.backends)
    with (
        SampleProgress(job.out, task.shard) as progress,  # what a watcher sees meanwhile
        one_thread_pools(),
        collecting() as notes,  # precompute.notes
    ):
        arrays = run_field_samples(job, task, result, cpus, stop, progress.add)
    if arrays is None:
        return result
    result.num_valid = num_valid(arrays)
    if job.check:  # precompute check: every sample decoded and checked, nothing written
        result.notes = {name: sorted(keys) for name, keys in notes.items()}
        return result
    result.seconds = time.perf_counter() - t0
    stats: dict[str, Any] = {"bytes_read": result.bytes_read, "seconds": round(result.seconds, 6)}
    if result.truncated:
        stats["truncated"] = sorted(result.truncated)
    if notes:
        stats["notes"] = {name: sorted(keys) for name, keys in notes.items()}
    bands = shard_band_stats(job.layout.fields, arrays)  # spectral fields (docs/arrays.md)
    if bands:
        stats["bands"] = bands
    counts = shard_class_counts(job.layout.fields, arrays)  # masks' pixels per class
    if counts:
        stats["class_counts"] = counts
    write_shard(
        job.out,  # a folder or an object-store URL: the writer opens its store
        job.layout,
        task.shard,
        arrays=arrays,
        skipped=result.skipped,
        stats=stats,
    )
    return result
