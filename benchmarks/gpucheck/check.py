"""The whole check, in order, within its time budget (default 6 minutes).

1. Build a store of the raw data with the in-process runner (no Ray), timed.
2. Run the ``gpu`` tests that need neither Ray nor DALI (:mod:`.gputests`).
3. Each feed alone (consumer ``none``): samples/s, host CPU ms per sample.
4. The decode row (:mod:`.decode`): a ``jpeg:90`` store of the same data built, then read alone
   decoded on the device (nvImageCodec), on the CPU reader threads, and the raw store beside.
5. Each feed under a real training step (:mod:`.consumers`): GPU utilisation over time
   (NVML), data-wait share, step-time variation, against the targets, through the harness
   (:func:`benchmarks.harness.loop.run_strategy`: the monitor, :mod:`loaders.diagnostics`' figures,
   verdicts and advice).

A run that would start after the budget is spent is reported as skipped, not run, and each
run starts no epoch after its share of what is left (``RunOptions.max_seconds``). With
``cpu=True`` (or without CUDA) the CUDA steps are skipped and the report says which.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.environment import environment
from benchmarks.gpucheck import feeds  # noqa: F401  (registers the check's strategies)
from benchmarks.gpucheck.consumers import make_consumer, pick_model
from benchmarks.gpucheck.decode import DECODE_FEEDS, decode_configs, jpeg_build
from benchmarks.gpucheck.gputests import run_gpu_tests
from benchmarks.harness.loop import RunOptions, run_strategy
from benchmarks.harness.sources import num_classes
from benchmarks.harness.strategies import RunConfig

__all__ = ["FEEDS", "CheckConfig", "run_check"]

FEEDS = ("store-f32", "store-bf16", "workers", "nvjpeg")
REPO = Path(__file__).resolve().parents[2]
_RESERVE_S = 20.0  # kept for the report at the end of the budget


@dataclass(frozen=True)
class CheckConfig:
    """What the check runs, and how long it may take.

    Attributes:
        data: Raw dataset (class folders of JPEGs).
        out: Where ``report.md``, ``report.json``, ``pytest.txt`` and the plots go.
        cpu: Skip the CUDA steps (run everything else on the CPU).
        size: Training crop side.
        stored: Side of the store's images (center-crop).
        batch_size: Samples per batch.
        workers: DataLoader workers of the classic feed; loader threads of the store feeds.
        epochs: Epochs per feed alone.
        train_epochs: Epochs per feed under the training step.
        model: ``auto``, ``resnet50``, ``tiny`` or ``none``.
        budget_s: Seconds the whole check may take.
        tests: Run the ``gpu`` tests.
        tests_timeout_s: Seconds the test run may take.
        seed: Order and augmentation seed.
        interval: Monitor sampling interval in seconds.
        feeds: The feeds to measure.
        decode: Measure the decode row (a JPEG store decoded on the device, on the CPU).
    """

    data: str
    out: Path
    cpu: bool = False
    size: int = 224
    stored: int = 256
    batch_size: int = 256
    workers: int = 16
    epochs: int = 8
    train_epochs: int = 12
    model: str = "auto"
    budget_s: float = 360.0
    tests: bool = True
    tests_timeout_s: float = 150.0
    seed: int = 0
    interval: float = 0.1
    feeds: tuple[str, ...] = FEEDS
    decode: bool = True


@dataclass
class _Clock:
    deadline: float
    skipped: list[str] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.perf_counter()


def _cuda_state(cfg: CheckConfig) -> tuple[torch.device, list[str]]:
    """The device, and the CUDA steps skipped (none on a GPU)."""
    if not cfg.cpu and torch.cuda.is_available():
        return torch.device("cuda"), []
    why = "--cpu" if cfg.cpu else "torch.cuda.is_available() is False"
    tests = ["the gpu tests ran and skipped (they need a CUDA device)"] if cfg.tests else []
    return torch.device("cpu"), [
        f"CUDA steps skipped ({why}):",
        *tests,
        "pinned host buffers and the side-stream copy (StoreLoader's CPU path ran)",
        "on-device augmentation and mixup on CUDA (the CPU fast path ran)",
        "nvJPEG: torchvision's CPU decode_jpeg ran in its place, where torchvision imports",
        "the JPEG store's device decode (nvImageCodec): its CPU decode and the raw store ran",
        "the bf16 ResNet-50 step (the small net ran on the CPU, float32)",
        "NVML GPU utilisation (CPU utilisation of this run instead)",
    ]


def _build(cfg: CheckConfig, work: Path) -> dict[str, Any]:
    """Build the store with the in-process runner; return where, how long, what it says."""
    from precompute.job import build
    from precompute.spec import BuildSpec

    spec = BuildSpec(size=cfg.stored, mode="center-crop", seed=cfg.seed)
    t0 = time.perf_counter()
    attrs = build(cfg.data, str(work / "store.zarr"), spec, progress=False, runner="sequential")
    seconds = time.perf_counter() - t0
    report = attrs["report"]
    return {
        "store": str(work / "store.zarr"),
        "runner": "sequential",
        "build_s": seconds,
        "num_valid": report["num_valid"],
        "samples_per_s": report["num_valid"] / seconds if seconds > 0 else None,
        "bytes_written": report["bytes_written"],
    }


def _feed_runs(
    runs: list[tuple[str, RunConfig]],
    consumer: Any,
    epochs: int,
    clock: _Clock,
    interval: float,
    later: int = 0,
) -> list[dict[str, Any]]:
    """Each ``(feed, config)`` once (``later``: runs that come after, sharing the budget)."""
    out = []
    for i, (name, run_cfg) in enumerate(runs):
        if clock.left() < _RESERVE_S:
            out.append({"name": name, "status": "skipped", "reason": "the time budget was spent"})
            continue
        # an equal share of what is left for each run still to come: no epoch starts after it
        share = (clock.left() - _RESERVE_S) / (len(runs) - i + later)
        opts = RunOptions(epochs=epochs, warmup_steps=2, interval=interval, max_seconds=share)
        t0 = time.perf_counter()
        result = run_strategy(name, run_cfg, consumer, opts)
        result["run_s"] = time.perf_counter() - t0
        out.append(result)
    return out


def _decode_row(
    cfg: CheckConfig, run_cfg: RunConfig, work: Path, clock: _Clock, later: int
) -> dict[str, Any]:
    """The JPEG store built, then the decode feeds alone (``later``: runs still to come)."""
    built = jpeg_build(cfg.data, work, cfg.stored, cfg.seed)
    none = make_consumer("none", 1, torch.device(run_cfg.device))
    runs = decode_configs(run_cfg, built["store"])
    return {"build": built, "runs": _feed_runs(runs, none, cfg.epochs, clock, cfg.interval, later)}


def run_check(cfg: CheckConfig) -> dict[str, Any]:
    """Run the check; return the report (not yet written)."""
    clock = _Clock(time.perf_counter() + cfg.budget_s)
    device, skipped = _cuda_state(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpucheck-"))
    report: dict[str, Any] = {"config": {**asdict(cfg), "device": str(device)}}
    report["cuda_skipped"] = skipped
    report["environment"] = environment()
    try:
        report["build"] = _build(cfg, work)
        if cfg.tests:
            report["tests"] = run_gpu_tests(REPO, cfg.out, min(cfg.tests_timeout_s, clock.left()))
        run_cfg = RunConfig(
            cfg.data,
            report["build"]["store"],
            cfg.batch_size,
            cfg.workers,
            cfg.size,
            cfg.seed,
            str(device),
        )
        model, why = pick_model(cfg.model, device)
        report["model"] = {"name": model, "why": why}
        alone = [(name, run_cfg) for name in cfg.feeds]
        decode = len(DECODE_FEEDS) if cfg.decode else 0
        later = len(cfg.feeds) + decode
        none = make_consumer("none", 1, device)
        report["alone"] = _feed_runs(alone, none, cfg.epochs, clock, cfg.interval, later)
        if cfg.decode:
            report["decode"] = _decode_row(cfg, run_cfg, work, clock, len(cfg.feeds))
        step = make_consumer(model, num_classes(cfg.data), device)
        report["trained"] = _feed_runs(alone, step, cfg.train_epochs, clock, cfg.interval)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = cfg.budget_s - clock.left()
    return report
