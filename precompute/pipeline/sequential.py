"""The build's in-process runner: every shard task in this process, one after another. No Ray.

``precompute build --runner sequential`` (``precompute.job.build(..., runner="sequential")``)
runs the same shard tasks as the Ray Data job (:func:`precompute.pipeline.shardwork.build_shard`,
the
same plan, lock, resume and finalize) on the calling thread, in shard order. It is for
debugging (a breakpoint in a shard task, a traceback without Ray's frames), for tests, and for
machines without Ray such as the GPU check kit (``benchmarks/gpucheck``). It is not a second
parallel engine: one shard at a time, on one core. Nothing here imports Ray.

A shard file is a pure function of (spec, source), so a sequential build writes the shard
files a Ray build of the same source and spec writes, byte for byte; only the report differs
(its timings, and ``ray_address`` says that no Ray ran).
"""

from __future__ import annotations

from typing import Any

from precompute.errors import BuildError, DecodeError
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.shardwork import ShardJob, build_shard

__all__ = ["NO_RAY", "run_in_process"]

# The report's ``ray_address`` of a sequential build (``ray_nodes`` is 0).
NO_RAY = "none: sequential runner"


def run_in_process(job: ShardJob, tasks: list[ShardTask], bar: Any) -> list[dict[str, Any]]:
    """Run ``tasks`` here in order; return their results, stopping at the first error.

    Raises:
        DecodeError: A bad input under ``on_error: raise``.
        BuildError: A shard task failed for another reason (e.g. the output disk is full).
    """
    results = []
    for task in tasks:
        try:
            result = build_shard(job, task).to_dict()
        except Exception as exc:
            raise BuildError(
                f"{job.out}: shard {task.shard} failed ({type(exc).__name__}: {exc}); the "
                "store stays incomplete and the build can be re-run to resume it"
            ) from exc
        if result["error"]:
            raise DecodeError(result["error"]["key"], result["error"]["reason"])
        results.append(result)
        bar.update(1)
    return results
