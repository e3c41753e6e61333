"""The build job: source -> plan -> Ray Data (one task per shard) -> writer. Imports Ray.

:func:`build` is the public entry point (the CLI and the service call it). It lists the source
on a background thread while Ray starts or is joined (:mod:`precompute.runtime.raysession`), takes
the
build lock ``OUT/_nostall/build.lock`` (non-blocking; a second build gets
:class:`~precompute.errors.BuildLockedError`), creates or resumes the store, runs the missing
shards as a Ray Data ``map`` over shard rows (each shard decoded and written by exactly one
task), and finalizes the store last. ``runner="sequential"`` runs the same shard tasks in this
process instead, one after another, and never imports Ray (:mod:`precompute.pipeline.sequential`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from precompute.errors import (
    BuildError,
    DecodeError,
    PrecomputeError,
)
from precompute.format.layout import StoreLayout, forget_stop, record_stop
from precompute.pipeline.check import (
    CheckReport,
    check_report,
    check_tasks,
    lenient,
    warn_class_shifts,
)
from precompute.pipeline.fieldwork import backends_of
from precompute.pipeline.outputs import (
    build_lock,
    build_report,
    check_output,
    existing_complete,
    remove_partials,
    store_bytes,
    summary_line,
)
from precompute.pipeline.plan import ShardTask
from precompute.pipeline.replace import replace_other
from precompute.pipeline.sequential import NO_RAY, run_in_process
from precompute.pipeline.shardwork import ShardJob, build_shard
from precompute.pipeline.start import holds_complete, in_background, list_source, open_build_ray
from precompute.pipeline.writer import create_or_resume, finalize
from precompute.runtime.cluster import check_shared_paths, current_node
from precompute.sources.resolve import plan_tasks
from precompute.spec import BuildSpec
from precompute.splits.build import record_source_splits
from precompute.storage.location import location

__all__ = ["RUNNERS", "build", "check", "store_bytes"]

# ``ray``: the Ray Data job; ``sequential``: every shard in this process, no Ray (debugging,
# tests, machines without Ray such as the GPU check kit).
RUNNERS = ("ray", "sequential")

# A worker that dies (e.g. killed for memory) is retried this often, then the build fails
# (Ray Data's default is to retry forever, which would hang on an input that always kills it).
_TASK_RETRIES = 2

# Ray Data settings for the build's dataset (set on its own context copy, not globally).
_DATA_CONTEXT: dict[str, Any] = {
    "enable_progress_bars": False,  # ours counts shards
    "print_on_execution_start": False,
    # The reservation allocator holds back part of the CPUs for other operators; with one
    # operator it only serialises the shard tasks (measured: 2 CPUs ran 1 task at a time).
    "op_resource_reservation_enabled": False,
}


def _shard_fn(job: ShardJob) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def run(row: dict[str, Any]) -> dict[str, Any]:
        try:
            result = build_shard(job, ShardTask.from_row(row)).to_dict()
            result["node"] = current_node()
        except Exception as exc:  # carried back as a value, re-raised by the driver
            result = {"shard": row["shard"], "failure": f"{type(exc).__name__}: {exc}"}
        return {"result": json.dumps(result)}

    return run


def _run_shards(job: ShardJob, tasks: list[ShardTask], bar: Any) -> list[dict[str, Any]]:
    """Run ``tasks`` on Ray Data; return their results, stopping at the first ``raise`` error.

    Raises:
        DecodeError: A bad input under ``on_error: raise``.
        BuildError: A shard task failed for another reason (e.g. the output disk is full, or
            its worker died three times).
    """
    import ray

    if not tasks:
        return []
    ds = ray.data.from_items([t.to_row() for t in tasks], override_num_blocks=len(tasks))
    results = []
    try:
        with warnings.catch_warnings():  # Ray 2.60 deprecates remote args given as kwargs,
            warnings.simplefilter("ignore", DeprecationWarning)  # but names no max_retries
            mapped = ds.map(_shard_fn(job), num_cpus=1, max_retries=_TASK_RETRIES)
        for name, value in _DATA_CONTEXT.items():  # this dataset's own copy of the context
            setattr(mapped.context, name, value)
        for row in mapped.iter_rows():
            result = json.loads(row["result"])
            if "failure" in result:
                raise BuildError(
                    f"{job.out}: shard {result['shard']} failed "
                    f"({result['failure']}); the store stays incomplete and the "
                    "build can be re-run to resume it"
                )
            if result["error"]:
                raise DecodeError(result["error"]["key"], result["error"]["reason"])
            results.append(result)
            bar.update(1)
    except (PrecomputeError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a worker died, or Ray itself failed
        raise BuildError(
            f"{job.out}: a shard task failed ({type(exc).__name__}); the store "
            "stays incomplete and the build can be re-run to resume it"
        ) from exc
    return results


def build(
    src: str,
    out: str,
    spec: BuildSpec,
    *,
    ray_address: str | None = None,
    progress: bool = True,
    content_hash: bool = False,
    runner: str = "ray",
    replace: bool = False,
) -> dict[str, Any]:
    """Build (or resume) the store of ``spec`` over ``src`` at ``out``; return its attributes.

    Args:
        src: Source folder, manifest, or fsspec URL of either; a segmentation folder or a
            manifest of field columns builds a store with fields (``docs/FORMAT.md``, v2).
        out: Local output folder (a shared filesystem when ``ray_address`` names a cluster),
            or an ``s3://`` URL (``docs/scale.md``).
        spec: The build spec; its ``fields`` are inferred from the source when empty and the
            source has fields (:func:`precompute.sources.resolve.infer_fields`).
        ray_address: The Ray to join (an address, or ``auto``), or ``local`` for the build's
            own; ``None``: ``RAY_ADDRESS``, else a running local Ray of the build's size, else
            its own (:mod:`precompute.runtime.raysession`).
        progress: Show a progress bar over shards and print the summary line (stderr).
        content_hash: Fingerprint the source by file contents instead of size and mtime.
        runner: ``ray`` (the Ray Data job) or ``sequential``: the same shard tasks in this
            process, one after another, without importing Ray
            (:mod:`precompute.pipeline.sequential`;
            for debugging, tests and machines without Ray). The shard files are the same.
        replace: Replace a nostall store of another spec or source at ``out`` instead of
            refusing it (:mod:`precompute.pipeline.replace`: a store only, never another
            folder).

    Returns:
        The store's final ``nostall`` attributes, including ``report``.

    Raises:
        SpecError: The source has fields and needs an option the spec does not give (the
            mask's class count).
        SourceError: The source cannot be listed.
        BuildLockedError: Another build holds the lock on ``out``.
        StoreMismatchError: ``out`` holds a store of another spec or source (and not
            ``replace``).
        StoreError: ``out`` is a URL other than ``s3://`` or a file, or a non-empty folder (or
            object prefix) that is not a store.
        ValueError: An unknown ``runner``, or ``ray_address`` with the sequential runner.
        DecodeError: A bad input under ``on_error: raise`` (the store stays resumable).
        ClusterError: Ray cannot be started, or the Ray named by ``ray_address`` or
            ``RAY_ADDRESS`` cannot be reached (the message names the address).
        BuildError: A shard task failed for a reason other than a bad input.
    """
    from tqdm import tqdm

    sequential = _check_runner(runner, ray_address)
    t0 = time.perf_counter()
    check_output(out, src)
    root = location(out).absolute()
    complete = holds_complete(root)
    listed = in_background(list_source, src, spec, content_hash, not (complete or sequential))
    with ExitStack() as ray_stack:
        # Ray starts while the source is listed, unless a complete store makes it likely that
        # none is needed (an identical re-run, or a refused one), or the runner needs none.
        ray = None if complete or sequential else open_build_ray(ray_stack, ray_address, listed)
        source, spec, fp = listed.result()
        warn_class_shifts(src, dict(source.classes), bool(spec.classes), root)  # docs/manifests.md
        layout = StoreLayout.from_spec(spec, len(source.items))
        with build_lock(root):
            replaced = replace_other(root, spec, layout, fp) if replace else None
            if replaced is not None and progress:  # --replace: another store was there
                print(
                    f"precompute: {root}: replaced a store of another {replaced}", file=sys.stderr
                )
            done = existing_complete(root, spec, fp)
            if done is not None:  # an identical re-run: nothing to do, and says so
                if progress:
                    print(
                        f"precompute: {root}: complete already (the same source and spec)",
                        file=sys.stderr,
                    )
                    print(summary_line(root, done), file=sys.stderr)
                return done
            try:
                finished = create_or_resume(root, spec, layout, fp)
                remove_partials(root)
                forget_stop(root)  # this build is the last one now
                todo = [s for s in range(layout.num_shards) if s not in finished]
                reader = dataclasses.replace(source, items=(), skipped=(), splits=())
                job = ShardJob(str(root), layout, spec, reader, backends_of(spec.fields))
                tasks = plan_tasks(source, layout, spec.seed, todo)
                if not sequential:
                    ray = ray or open_build_ray(ray_stack, ray_address)
                with tqdm(
                    total=layout.num_shards,
                    initial=len(finished),
                    unit="shard",
                    disable=not progress,
                    desc="precompute build",
                    file=sys.stderr,
                ) as bar:
                    if ray is not None and ray.probe:  # every node writes --out, reads SRC
                        check_shared_paths([str(root), source.root])
                    t1 = time.perf_counter()
                    if ray is None:
                        results = run_in_process(job, tasks, bar)
                    else:
                        results = _run_shards(job, tasks, bar)
                    t2 = time.perf_counter()
            except Exception as exc:  # inspect, verify and a loader say why the store is partial
                record_stop(root, exc)
                raise
            finally:
                # Ray stops (or is left) while the lock is held, on failure too: no shard task
                # of this build still writes when another build takes the lock
                ray_stack.close()
            address = NO_RAY if ray is None else ray.address
            report = build_report(
                source, results, len(finished), t2 - t0, t2 - t1, address, spec.fields, src
            )
            remove_partials(root)  # a killed build's writers may have outlived its driver
            report["bytes_written"] = store_bytes(root)
            # Ray nodes that built shards (none for the sequential runner)
            report["ray_nodes"] = len({r["node"] for r in results if "node" in r})
            record_source_splits(root, source.splits, spec.seed)  # a manifest's split column
            attrs = finalize(root, report)
    if progress:
        print(summary_line(root, attrs), file=sys.stderr)
    return dict(attrs)


def _check_runner(runner: str, ray_address: str | None) -> bool:
    """Return whether ``runner`` is the sequential one.

    Raises:
        ValueError: An unknown runner, or a Ray address given to the sequential runner.
    """
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
    if runner == "sequential" and ray_address is not None:
        raise ValueError(
            f"ray_address {ray_address!r} was given with runner 'sequential', which runs "
            "without Ray: give one or the other"
        )
    return runner == "sequential"


def check(
    src: str,
    spec: BuildSpec,
    *,
    ray_address: str | None = None,
    progress: bool = True,
    runner: str = "ray",
) -> CheckReport:
    """Find every bad input of ``src`` for ``spec`` at once, writing nothing.

    The build's listing and shard tasks under ``on_error: skip``, without a store
    (:mod:`precompute.pipeline.check`): on Ray, or in this process with
    ``runner="sequential"``, as :func:`build` runs them.

    Raises:
        SpecError: As :func:`build`.
        SourceError: The source cannot be listed at all (as :func:`build`).
        ClusterError: Ray cannot be started or reached.
        BuildError: A shard task failed for a reason other than a bad input.
    """
    from tqdm import tqdm

    sequential = _check_runner(runner, ray_address)
    listed = in_background(list_source, src, lenient(spec), False, not sequential)
    with ExitStack() as ray_stack:
        ray = None if sequential else open_build_ray(ray_stack, ray_address, listed)
        source, resolved, _ = listed.result()
        job, tasks = check_tasks(src, source, resolved)
        with tqdm(
            total=len(tasks),
            unit="shard",
            disable=not progress,
            desc="precompute check",
            file=sys.stderr,
        ) as bar:
            run = run_in_process if ray is None else _run_shards
            results = run(job, tasks, bar)
    return check_report(src, source, results)
