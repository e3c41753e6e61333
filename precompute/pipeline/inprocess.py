"""The build's in-process runner: the same shard tasks in this process, on a few threads. No Ray.

``precompute build --runner sequential`` runs the shard tasks on the calling thread, one after
another, each on one core: for debugging (a breakpoint in a shard task, a traceback without
Ray's frames), tests, and machines without Ray such as the GPU check kit
(``benchmarks/gpucheck``). ``--runner auto`` (the default) runs a source whose work is below
what starting Ray costs in this process (:mod:`precompute.pipeline.runner`): the same shard
tasks, given the usable CPUs between them (:func:`task_shape`): up to one task per CPU at a
time, and a task given several CPUs (fewer shards than CPUs: 200 samples in one shard of 256)
decodes its samples on that many threads (:mod:`precompute.runtime.threads`). Decoders spend
their time in C code that releases the GIL (Pillow, libsndfile, soxr, torch), so threads use
the cores; one writer per shard, as on Ray. It is not a second parallel engine: the build is
the Ray Data job wherever Ray is started, and this runner starts nothing.

A shard file is a pure function of (spec, source), so both runners write the shard files a Ray
build of the same source and spec writes, byte for byte; only the report differs (its timings,
and ``ray_address`` says that no Ray ran). Nothing here imports Ray.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from precompute.errors import BuildError, DecodeError
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.shardwork import ShardJob, build_shard
from precompute.runtime.threads import one_thread_pools, thread_pools

__all__ = ["IN_PROCESS", "NO_RAY", "run_in_process", "task_shape"]

# The report's ``ray_address`` of a build without Ray (``ray_nodes`` is 0): the sequential
# runner's, and the in-process runner's that ``--runner auto`` chose.
NO_RAY = "none: sequential runner"
IN_PROCESS = "none: in process"


def task_shape(num_tasks: int, cpus: int) -> tuple[int, int]:
    """``(tasks at a time, CPUs per task)`` of ``num_tasks`` shard tasks on ``cpus`` CPUs.

    Every CPU has work while there are as many tasks as CPUs: fewer tasks share the CPUs
    (3 tasks on 16 CPUs: 3 at a time, 5 CPUs each; 1 task on 2 CPUs: 2 CPUs); more take one
    CPU each.
    """
    cpus = max(cpus, 1)
    per = max(1, cpus // max(num_tasks, 1))
    return max(1, min(num_tasks, cpus // per)), per


def run_in_process(
    job: ShardJob, tasks: list[ShardTask], bar: Any, cpus: int = 1
) -> list[dict[str, Any]]:
    """Run ``tasks`` here on ``cpus`` CPUs (1: in order, on this thread); stop at an error.

    Raises:
        DecodeError: A bad input under ``on_error: raise``.
        BuildError: A shard task failed for another reason (e.g. the output disk is full).
    """
    at_once, per = task_shape(len(tasks), cpus)
    stop = threading.Event()  # set when the build stops: running tasks leave off
    with one_thread_pools():
        if at_once == 1:
            return [_done(job, t, _task(job, t, per, stop), bar) for t in tasks]
        with thread_pools(at_once, "precompute-shard") as pool:
            futures = {pool.submit(_task, job, t, per, stop): t for t in tasks}
            try:
                return _collect(futures, job, bar)
            finally:  # an error, or Ctrl-C on this thread: no task starts or goes on
                stop.set()
                for future in futures:
                    future.cancel()


def _collect(futures: dict[Future[Any], ShardTask], job: ShardJob, bar: Any) -> list[Any]:
    """The tasks' results as they complete; the first failure raised."""
    results = []
    todo = set(futures)
    while todo:
        finished, todo = wait(todo, return_when=FIRST_COMPLETED)
        results += [_done(job, futures[f], f.result(), bar) for f in finished]
    return results


def _task(job: ShardJob, task: ShardTask, per: int, stop: threading.Event) -> Any:
    """One shard task; an error is returned (raised on the caller's thread by ``_done``)."""
    try:
        return build_shard(job, task, per, stop)
    except Exception as exc:
        return exc


def _done(job: ShardJob, task: ShardTask, outcome: Any, bar: Any) -> dict[str, Any]:
    """A task's result as the report takes it; its failure raised, naming the shard."""
    if isinstance(outcome, BaseException):
        raise BuildError(
            f"{job.out}: shard {task.shard} failed ({type(outcome).__name__}: {outcome}); the "
            "store stays incomplete and the build can be re-run to resume it"
        ) from outcome
    result: dict[str, Any] = outcome.to_dict()
    if result["error"]:
        raise DecodeError(result["error"]["key"], result["error"]["reason"])
    bar.update(1)
    return result
