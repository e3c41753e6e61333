"""One benchmark run end to end: build or open the store, run the strategies, write the report."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from benchmarks.environment import environment
from benchmarks.errors import BenchConfigError
from benchmarks.harness.consumers import parse_consumer
from benchmarks.harness.loop import RunOptions, run_all
from benchmarks.harness.prepare_store import build_store, check_store_source, store_build_info
from benchmarks.harness.report import write_report
from benchmarks.harness.sources import num_classes
from benchmarks.harness.strategies import RunConfig, get_strategy

__all__ = ["DEFAULT_STRATEGIES", "run_benchmark"]

DEFAULT_STRATEGIES = ("workers", "precompute", "precompute-dali", "gpu-decode")


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _prepare_store(
    data: str, out: Path, store: str | None, size: int, seed: int, names: list[str]
) -> tuple[str | None, dict[str, Any] | None]:
    if not any(get_strategy(n).needs_store for n in names):
        return store, None
    if store:
        warning = check_store_source(data, store)
        return store, {**store_build_info(store), "warning": warning}
    build = build_store(data, out / "store.zarr", size=size, seed=seed)
    return (build["store"] if build["status"] in ("built", "reused") else None), build


def run_benchmark(
    data: str,
    out: str | Path,
    *,
    store: str | None = None,
    strategies: list[str] | tuple[str, ...] = DEFAULT_STRATEGIES,
    epochs: int = 3,
    batch_size: int = 64,
    workers: int = 2,
    size: int = 64,
    consumer: str = "none",
    device: str | None = None,
    seed: int = 0,
    options: RunOptions | None = None,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run every strategy on ``data`` and write the report into ``out``.

    Returns:
        The report dict and the paths written (``json``, ``md``).

    Raises:
        BenchConfigError: A bad option (unknown strategy or consumer, epochs < 1, a ``store``
            built from another dataset than ``data``, ...).
    """
    names = list(strategies)
    if not names:
        raise BenchConfigError("--strategies is empty")
    if epochs < 1:
        raise BenchConfigError(f"--epochs must be >= 1, got {epochs}")
    for name in names:
        get_strategy(name)  # unknown names fail before any work
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dev = device or _default_device()
    eat = parse_consumer(consumer, torch.device(dev), num_classes(data))
    opts = options or RunOptions(epochs=epochs)
    if opts.epochs != epochs:
        opts = RunOptions(epochs, opts.warmup_steps, opts.interval, opts.max_steps)
    store_path, build = _prepare_store(data, out, store, size, seed, names)
    reason = (build or {}).get("reason")
    cfg = RunConfig(data, store_path, batch_size, workers, size, seed, dev, reason)
    results = run_all(names, cfg, eat, opts)
    has_gpu = any(s.get("util_source") == "gpu_util" for s in results)
    report: dict[str, Any] = {
        "environment": environment(),
        "config": {
            **asdict(cfg),
            "epochs": epochs,
            "consumer": consumer,
            "strategies": names,
            "warmup_steps": opts.warmup_steps,
            "interval_s": opts.interval,
            "max_steps": opts.max_steps,
        },
        "build": build,
        "strategies": results,
        "util_note": (
            "GPU utilisation via NVML"
            if has_gpu
            else "no GPU: CPU metrics only (the GPU verdict is not available)"
        ),
    }
    return report, write_report(report, out)
