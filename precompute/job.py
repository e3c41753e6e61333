"""The build job: source -> plan -> Ray Data (one task per shard) -> writer. Imports Ray.

:func:`build` is the public entry point (the CLI and the service call it). It lists the source
on a background thread while Ray starts or is joined (:mod:`precompute.runtime.raysession`), takes
the
build lock ``OUT/_nostall/build.lock`` (non-blocking; a second build gets
:class:`~precompute.errors.BuildLockedError`), creates or resumes the store, runs the missing
shards as a Ray Data ``map`` over shard rows (each shard decoded and written by exactly one
task), and finalizes the store last. ``runner="auto"`` (the default) runs a source whose work is
below what starting Ray costs in this process instead, the same shard tasks on the usable CPUs
(:mod:`precompute.pipeline.runner`, :mod:`precompute.pipeline.inprocess`); ``sequential`` runs
them one after another and never imports Ray.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping
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
from precompute.pipeline.inprocess import IN_PROCESS, NO_RAY, run_in_process, task_shape
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
from precompute.pipeline.runner import RUNNERS, Choice, choose, named_ray
from precompute.pipeline.shardwork import ShardJob, build_shard
from precompute.pipeline.start import holds_complete, in_background, list_source, open_build_ray
from precompute.pipeline.writer import check_resumable, create_or_resume, finalize
from precompute.runtime.cluster import check_shared_paths, current_node
from precompute.runtime.raylocal import available_cpus
from precompute.sources.resolve import plan_tasks
from precompute.spec import BuildSpec
from precompute.splits.build import record_source_splits
from precompute.storage.location import location
from precompute.transforms.given import check_nodes, job_env, with_transform
from precompute.transforms.spec import TransformSpec

__all__ = ["RUNNERS", "build", "check", "store_bytes"]


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


def _shard_fn(job: ShardJob, cpus: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def run(row: dict[str, Any]) -> dict[str, Any]:
        try:
            result = build_shard(job, ShardTask.from_row(row), cpus).to_dict()
            result["node"] = current_node()
        except Exception as exc:  # carried back as a value, re-raised by the driver
            result = {"shard": row["shard"], "failure": f"{type(exc).__name__}: {exc}"}
        return {"result": json.dumps(result)}

    return run


def _task_cpus(num_tasks: int) -> int:
    """The CPUs each shard task is given: all of the cluster's between fewer tasks than CPUs.

    At most one node's CPUs (a task runs on one node); the task decodes on that many threads.
    """
    import ray

    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    alive = [n.get("Resources", {}).get("CPU", 0) for n in nodes if n.get("Alive")]
    total, biggest = int(sum(alive)), int(max(alive, default=1))
    return max(1, min(task_shape(num_tasks, total)[1], biggest))


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
    cpus = _task_cpus(len(tasks))
    ds = ray.data.from_items([t.to_row() for t in tasks], override_num_blocks=len(tasks))
    results = []
    try:
        with warnings.catch_warnings():  # Ray 2.60 deprecates remote args given as kwargs,
            warnings.simplefilter("ignore", DeprecationWarning)  # but names no max_retries
            mapped = ds.map(_shard_fn(job, cpus), num_cpus=cpus, max_retries=_TASK_RETRIES)
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
    runner: str = "auto",
    summary: bool | None = None,
    replace: bool = False,
    transform: Callable[..., Any] | str | TransformSpec | None = None,
    transform_args: Mapping[str, Any] | None = None,
    transform_at: str | None = None,
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
        progress: Show a progress bar over shards (stderr).
        content_hash: Fingerprint the source by file contents instead of size and mtime.
        runner: ``auto`` (Ray where one is named or running, or where the source's work is
            more than starting Ray costs; else the same shard tasks in this process on the
            usable CPUs: :mod:`precompute.pipeline.runner`), ``ray`` (the Ray Data job) or
            ``sequential`` (the shard tasks in this process, one after another, without
            importing Ray: :mod:`precompute.pipeline.inprocess`; for debugging, tests and
            machines without Ray). The shard files are the same.
        summary: Print the summary line and the notes (stderr); default: ``progress``.
        replace: Replace a nostall store of another spec or source at ``out`` instead of
            refusing it (:mod:`precompute.pipeline.replace`: a store only, never another
            folder).
        transform: The user's transform of each sample (``docs/transforms.md``): a function
            of a module (``fn(sample, key, **transform_args) -> sample``), its
            ``pkg.module:function`` name or a :class:`TransformSpec`; the spec's
            ``transform`` set to it (part of the spec hash, with its code's fingerprint).
        transform_args: Its keyword arguments (JSON values).
        transform_at: ``stored`` (default: after the resize) or ``decoded`` (before it).

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

    named = _check_runner(runner, ray_address)
    spec = with_transform(spec, transform, transform_args, transform_at)
    env = job_env(spec.transform)  # a joined Ray's job gets the transform's modules
    say = progress if summary is None else summary
    t0 = time.perf_counter()
    check_output(out, src)
    root = location(out).absolute()
    complete = holds_complete(root)
    # Ray starts while the source is listed where it is known to be needed, unless a complete
    # store makes it likely that none is (an identical re-run, or a refused one)
    ray_first = runner == "ray" or (runner == "auto" and named is not None)
    listed = in_background(list_source, src, spec, content_hash, ray_first and not complete)
    with ExitStack() as ray_stack:
        ray = (
            open_build_ray(ray_stack, ray_address, listed, env)
            if ray_first and not complete
            else None
        )
        source, spec, fp = listed.result()
        warn_class_shifts(src, dict(source.classes), bool(spec.classes), root)  # docs/manifests.md
        layout = StoreLayout.from_spec(spec, len(source.items))
        with build_lock(root):
            replaced = replace_other(root, spec, layout, fp) if replace else None
            if replaced is not None and say:  # --replace: another store was there
                print(
                    f"precompute: {root}: replaced a store of another spec or source: {replaced}",
                    file=sys.stderr,
                )
            done = existing_complete(root, spec, fp)
            if done is not None:  # an identical re-run: nothing to do, and says so
                if say:
                    print(
                        f"precompute: {root}: complete already (the same source and spec)",
                        file=sys.stderr,
                    )
                    print(summary_line(root, done), file=sys.stderr)
                return done
            check_resumable(root, spec, layout, fp)  # refused: nothing written, stopped.json too
            try:
                finished = create_or_resume(root, spec, layout, fp)
                remove_partials(root)
                forget_stop(root)  # this build is the last one now
                todo = [s for s in range(layout.num_shards) if s not in finished]
                reader = dataclasses.replace(source, items=(), skipped=(), splits=())
                job = ShardJob(str(root), layout, spec, reader, backends_of(spec.fields))
                tasks = plan_tasks(source, layout, spec.seed, todo)
                choice = _choice(runner, named, job, tasks)
                if choice.runner == "ray":
                    ray = ray or open_build_ray(ray_stack, ray_address, runtime_env=env)
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
                    check_nodes(spec.transform, ray)  # every node imports it, first
                    t1 = time.perf_counter()
                    if ray is None:
                        results = run_in_process(job, tasks, bar, choice.cpus)
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
            address = ray.address if ray is not None else _NO_RAY[choice.runner]
            report = build_report(
                source, results, len(finished), t2 - t0, t2 - t1, address, spec.fields, src
            )
            report["runner"] = choice.to_dict()
            remove_partials(root)  # a killed build's writers may have outlived its driver
            report["bytes_written"] = store_bytes(root)
            # Ray nodes that built shards (none for the in-process runners)
            report["ray_nodes"] = len({r["node"] for r in results if "node" in r})
            record_source_splits(root, source.splits, spec.seed)  # a manifest's split column
            attrs = finalize(root, report)
    if say:
        print(summary_line(root, attrs), file=sys.stderr)
    return dict(attrs)


# The report's ``ray_address`` of a build without Ray, by runner.
_NO_RAY = {"sequential": NO_RAY, "in process": IN_PROCESS}


def _choice(runner: str, named: str | None, job: ShardJob, tasks: list[ShardTask]) -> Choice:
    """The runner of ``tasks``: the one asked for, or ``auto``'s (:mod:`.pipeline.runner`)."""
    if runner == "sequential":
        return Choice("sequential", "--runner sequential")
    if runner == "ray":
        return Choice("ray", "--runner ray")
    if named is not None:
        return Choice("ray", named)
    return choose(job, tasks, sum(len(t.items) for t in tasks), available_cpus())


def _check_runner(runner: str, ray_address: str | None) -> str | None:
    """Return what names a Ray for this build, if anything does (:func:`.runner.named_ray`).

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
    return named_ray(ray_address)


def check(
    src: str,
    spec: BuildSpec,
    *,
    ray_address: str | None = None,
    progress: bool = True,
    runner: str = "auto",
) -> CheckReport:
    """Find every bad input of ``src`` for ``spec`` at once, writing nothing.

    The build's listing and shard tasks under ``on_error: skip``, without a store
    (:mod:`precompute.pipeline.check`): on Ray or in this process, the runner chosen as
    :func:`build` chooses it.

    Raises:
        SpecError: As :func:`build`.
        SourceError: The source cannot be listed at all (as :func:`build`).
        ClusterError: Ray cannot be started or reached.
        BuildError: A shard task failed for a reason other than a bad input.
    """
    from tqdm import tqdm

    named = _check_runner(runner, ray_address)
    ray_first = runner == "ray" or (runner == "auto" and named is not None)
    listed = in_background(list_source, src, lenient(spec), False, ray_first)
    with ExitStack() as ray_stack:
        env = job_env(spec.transform)
        ray = open_build_ray(ray_stack, ray_address, listed, env) if ray_first else None
        source, resolved, _ = listed.result()
        job, tasks = check_tasks(src, source, resolved)
        choice = _choice(runner, named, job, tasks)
        if choice.runner == "ray":
            ray = ray or open_build_ray(ray_stack, ray_address, runtime_env=env)
        with tqdm(
            total=len(tasks),
            unit="shard",
            disable=not progress,
            desc="precompute check",
            file=sys.stderr,
        ) as bar:
            if ray is None:
                results = run_in_process(job, tasks, bar, choice.cpus)
            else:
                check_nodes(resolved.transform, ray)
                results = _run_shards(job, tasks, bar)
    return check_report(src, source, results, resolved.fields)
