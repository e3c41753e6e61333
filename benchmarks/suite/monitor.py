"""Overhead of the monitor on a loader-only run (target: under 2%).

Runs the same loader-only epochs with and without :class:`loaders.monitor.Monitor` (10 Hz,
step timings recorded like the harness does), taking turns (:mod:`benchmarks.runner`),
``--repeats`` times, and prints their seconds and the median paired ratios. Also prints the
monitor thread's own CPU over the run's wall time, which bounds its overhead independently of
the noise of the loader timings.

Usage: ``.venv/bin/python -m benchmarks.suite.monitor [--samples 4096] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.environment import environment
from benchmarks.runner import Bench, Line, Results, Row, Run, add_json_argument, measure
from loaders.monitor import Monitor

WITHOUT, WITH = "without monitor", "with monitor"


def make_store(root: Path, n: int, size: int) -> Path:
    """Write a store of ``n`` random ``size`` px images (setup, not timed)."""
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.spec import BuildSpec

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    write_store_from_arrays(root, images, np.arange(n) % 10, BuildSpec(size=size))
    return root


def steps(loader: object, epochs: int, record: Callable[[float, float], None]) -> int:
    """Run ``epochs`` loader-only epochs, timing each step like the harness; return the samples."""
    n = 0
    for _ in range(epochs):
        it = iter(loader)  # type: ignore[call-overload]
        while True:
            t0 = time.perf_counter()
            batch = next(it, None)
            t1 = time.perf_counter()
            if batch is None:
                break
            n += len(batch["index"])
            record(t1 - t0, time.perf_counter() - t1)
    return n


def rows(loader: object, interval: float, epochs: int) -> list[Row]:
    """The same epochs without and with the monitor (its thread's CPU recorded)."""

    def without(run: Run) -> int:
        got: list[tuple[float, float]] = []
        return steps(loader, epochs, lambda w, c: got.append((w, c)))

    def with_monitor(run: Run) -> int:
        with Monitor(interval) as mon:
            n = steps(loader, epochs, mon.record_step)
        run.record("monitor_cpu_s", mon.result().self_cpu_s)
        return n

    show = ("wall_s", "rate", "cpu_s")
    return [
        Row(WITHOUT, without, show=show),
        Row(WITH, with_monitor, show=(*show, "monitor_cpu_s")),
    ]


def _paired(figure: str) -> Callable[[Results], float]:
    return lambda r: statistics.median(
        a / b for a, b in zip(r[WITH].values(figure), r[WITHOUT].values(figure), strict=True)
    )


def _self_share(r: Results) -> float:
    got = r[WITH]
    return statistics.median(
        c / w for c, w in zip(got.values("monitor_cpu_s"), got.values("wall_s"), strict=True)
    )


def lines(cores: int) -> list[Line]:
    """The median paired ratios and the monitor thread's share of a core."""
    return [
        Line(
            "median paired ratio with/without:",
            _paired("wall_s"),
            lambda v: f"{v:.4f} ({100 * (v - 1):+.2f}%; wall-clock, noisy on a shared machine)",
        ),
        Line(
            "median paired ratio of process CPU seconds with/without:",
            _paired("cpu_s"),
            lambda v: f"{v:.4f} ({100 * (v - 1):+.2f}%)",
        ),
        Line(
            "monitor thread CPU / run wall time:",
            _self_share,
            lambda v: f"{100 * v:.3f}% of one core ({100 * v / cores:.3f}% of the machine)",
            "(target < 2%)",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    """Measure the loader-only run with and without the monitor and print the overhead."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one measurement")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    from loaders import StoreLoader

    env = environment()
    with Bench("monitor", args.json) as bench, tempfile.TemporaryDirectory() as tmp:
        bench.note(
            f"env: {env['cpu']}, {env['cores_usable']} cores, GPU {env['gpu'].get('name')}, "
            f"torch {env['versions']['torch']}"
        )
        store = make_store(Path(tmp) / "s.zarr", args.samples, args.size)
        loader = StoreLoader(store, args.batch_size, device="cpu", augment=None)
        probe = rows(loader, args.interval, 1)[0]  # warm-up: page cache, threads
        warm = measure([probe], runs=1, warmup=0)[WITHOUT].median("wall_s")
        epochs = max(1, math.ceil(args.seconds / warm))  # each measurement lasts ~--seconds
        title = (
            f"loader-only StoreLoader run: {epochs} epochs x {args.samples} samples, "
            f"{args.size} px, batch {args.batch_size}, no augment; {args.repeats} pairs"
        )
        timed = rows(loader, args.interval, epochs)
        bench.measure(title, timed, runs=args.repeats, warmup=0, lines=lines(env["cores_usable"]))


if __name__ == "__main__":
    main()
