"""One benchmark run end to end: list the source, build or open the store, run, report.

The source and its build spec are taken as ``precompute build`` takes them
(:func:`benchmarks.harness.sources.plan_source`), the workload follows from the kinds of its
fields (:func:`benchmarks.harness.workloads.choose`), the store is built with that spec, and
every strategy serves the workload's batches.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.environment import environment, usable_cores
from benchmarks.errors import BenchConfigError
from benchmarks.harness.consumers import TorchThreads, parse_consumer, torch_threads_of
from benchmarks.harness.loop import RunOptions, run_all
from benchmarks.harness.prepare_store import build_store, check_store_source, store_build_info
from benchmarks.harness.report import write_report
from benchmarks.harness.sources import SourcePlan, num_classes, plan_source
from benchmarks.harness.stored import fields_text, store_sample
from benchmarks.harness.strategies import RunConfig, get_strategy
from benchmarks.harness.workloads import choose

__all__ = ["DEFAULT_STRATEGIES", "BuildOptions", "run_benchmark"]

DEFAULT_STRATEGIES = (
    "workers",
    "precompute",
    "precompute-dali",
    "gpu-decode",
    "tf-native",
    "tf-store",
    "memmap",
)


@dataclass(frozen=True)
class BuildOptions:
    """How the harness builds the store, as ``precompute build`` takes it.

    Attributes:
        runner: ``ray`` or ``sequential`` (``precompute build --runner``).
        ray_address: The Ray to join (``--ray-address``), or None.
        content_hash: Fingerprint the source by content (``--content-hash``).
    """

    runner: str = "ray"
    ray_address: str | None = None
    content_hash: bool = False


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _prepare_store(
    plan: SourcePlan, out: Path, store: str | None, names: list[str], how: BuildOptions
) -> tuple[str | None, dict[str, Any] | None]:
    if not any(get_strategy(n).needs_store for n in names):
        return store, None
    if store:
        warning = check_store_source(plan, store)
        codecs = store_sample(store)["codecs"]
        return store, {**store_build_info(store), "warning": warning, "codecs": codecs}
    build = build_store(plan.data, out / "store.zarr", spec=plan.given, **asdict(how))
    if build["status"] in ("built", "reused"):  # its fields' codecs and bytes, as inspect's
        return build["store"], {**build, "codecs": store_sample(build["store"])["codecs"]}
    return None, build


def _spec(spec: Any, size: int | str, seed: int) -> Any:
    from precompute.spec import BuildSpec

    if spec is None:
        return BuildSpec(size=size, seed=seed)
    return spec if isinstance(spec, BuildSpec) else BuildSpec.from_dict(dict(spec))


def run_benchmark(
    data: str,
    out: str | Path,
    *,
    store: str | None = None,
    strategies: list[str] | tuple[str, ...] = DEFAULT_STRATEGIES,
    epochs: int = 3,
    batch_size: int = 64,
    workers: int = 2,
    size: int | str = 64,
    consumer: str = "none",
    device: str | None = None,
    seed: int = 0,
    options: RunOptions | None = None,
    spec: Any = None,
    build: BuildOptions | None = None,
    mixup: float = 0.0,
    torch_threads: int | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run every strategy on ``data`` and write the report into ``out``.

    Args:
        data: The source, as ``precompute build`` takes it.
        out: The report folder (and the built store's, ``OUT/store.zarr``).
        store: An existing store built from ``data`` (else one is built).
        strategies: Strategy names, run one after another.
        epochs: Epochs per strategy.
        batch_size: Samples per batch.
        workers: Worker processes / loader threads.
        size: Output size of image crops (the spec's ``size`` when ``spec`` is None).
        consumer: ``none``, ``fixed:<ms>`` or ``model`` (the workload's network).
        device: ``cpu`` or ``cuda`` (default: CUDA when there is one).
        seed: Order and augmentation seed.
        options: Warm-up, monitor interval, step and time limits.
        spec: The build spec (a ``BuildSpec`` or its dict; ``precompute build``'s flags give
            it on the command line); None: images at ``size``.
        build: How the store is built (runner, Ray, content fingerprint).
        mixup: Mixup's Beta concentration (0: off); every strategy mixes its batches.
        torch_threads: The training thread's torch intra-op threads while the strategies run
            (``--torch-threads``); None: the cores ``workers`` leave, at least 1
            (:class:`benchmarks.harness.consumers.TorchThreads`). The process's own setting
            is restored after.

    Returns:
        The report dict and the paths written (``json``, ``md``, ``html``).

    Raises:
        BenchConfigError: A bad option (unknown strategy or consumer, epochs < 1, a ``store``
            built from another dataset than ``data``, fields no workload takes, ...).
        precompute.SpecError, precompute.SourceError: The source or spec, as ``precompute
            build`` would refuse them.
    """
    names = list(strategies)
    plan = plan_source(data, given := _spec(spec, size, seed))
    choose(plan, mixup)  # a workload that cannot take --mixup fails before any work
    if not names:
        raise BenchConfigError("--strategies is empty")
    if epochs < 1:
        raise BenchConfigError(f"--epochs must be >= 1, got {epochs}")
    for name in names:
        get_strategy(name)  # unknown names fail before any work
    plan = dataclasses.replace(plan, given=given)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dev = device or _default_device()
    opts = options or RunOptions(epochs=epochs)
    if opts.epochs != epochs:
        opts = dataclasses.replace(opts, epochs=epochs)
    store_path, built = _prepare_store(plan, out, store, names, build or BuildOptions())
    reason = (built or {}).get("reason")
    cfg = RunConfig(data, store_path, batch_size, workers, plan.spec.size, seed, dev,
                    reason, spec=given, epochs=epochs, mixup=mixup)  # fmt: skip
    cfg.__dict__["plan"] = plan  # listed once: the strategies read the same items
    workload = cfg.workload
    eat = parse_consumer(consumer, torch.device(dev), num_classes(plan), workload)
    pool = TorchThreads.choose(torch_threads, usable_cores(), workers)
    with torch_threads_of(pool.threads):
        results = run_all(names, cfg, eat, opts)
    has_gpu = any(s.get("util_source") == "gpu_util" for s in results)
    config = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name != "spec"}
    report: dict[str, Any] = {
        "environment": environment(),
        "config": {
            **config,
            "spec": plan.spec.to_dict(),
            "consumer": consumer,
            "strategies": names,
            "warmup_steps": opts.warmup_steps,
            "interval_s": opts.interval,
            "max_steps": opts.max_steps,
            "torch_threads": pool.threads,
            "torch_threads_policy": pool.text,
            "torch_threads_caveat": pool.caveat(),
        },
        "workload": {
            "name": workload.name,
            "task": workload.title,
            "fields": [f"{f.name} ({f.kind})" for f in plan.fields],
            "samples": len(plan),
            "stored": workload.stored,
            "stored_fields": fields_text(plan.fields, plan.spec.size),
            "carried": list(workload.carried),
            "left_out": workload.left_out_text(),
            "left_out_fields": workload.left_out_names(),
            "batch": workload.batch_text()
            + (f"; mixup {mixup:g}: targets soft [B, classes]" if mixup else ""),
        },
        "build": built,
        "strategies": results,
        "util_note": (
            "GPU utilisation via NVML"
            if has_gpu
            else "no GPU: CPU metrics only (the GPU verdict is not available)"
        ),
    }
    return report, write_report(report, out)
