"""Overhead of the monitor on a loader-only run (target: under 2%).

Runs the same loader-only epoch with and without :class:`loaders.monitor.Monitor` (10 Hz,
step timings recorded like the harness does), alternating, several times, and prints the median
epoch times and their ratio. Also prints the monitor's own cost per sample, which bounds its
overhead independently of the noise of the loader timings.

Usage: ``.venv/bin/python -m benchmarks.bench_monitor [--samples 4096] [--repeats 7]``
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
from loaders.monitor import Monitor


def make_store(root: Path, n: int, size: int) -> Path:
    """Write a store of ``n`` random ``size`` px images (setup, not timed)."""
    from precompute.spec import BuildSpec
    from precompute.writer import write_store_from_arrays

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    write_store_from_arrays(root, images, np.arange(n) % 10, BuildSpec(size=size))
    return root


def epoch_time(
    loader: object, monitored: bool, interval: float, epochs: int = 1
) -> tuple[float, float, float]:
    """Time ``epochs`` loader-only epochs, timing each step like the harness.

    Returns:
        (wall seconds, CPU seconds of the monitor's sampling thread, process CPU seconds).
    """

    def run(record: Callable[[float, float], None]) -> float:
        t_start = time.perf_counter()
        for _ in range(epochs):
            it = iter(loader)  # type: ignore[call-overload]
            while True:
                t0 = time.perf_counter()
                batch = next(it, None)
                t1 = time.perf_counter()
                if batch is None:
                    break
                record(t1 - t0, time.perf_counter() - t1)
        return time.perf_counter() - t_start

    cpu0 = time.process_time()
    if not monitored:
        steps: list[tuple[float, float]] = []
        secs = run(lambda w, c: steps.append((w, c)))
        return secs, 0.0, time.process_time() - cpu0
    with Monitor(interval) as mon:
        secs = run(mon.record_step)
    return secs, mon.result().self_cpu_s, time.process_time() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one measurement")
    args = ap.parse_args()
    from loaders import StoreLoader

    env = environment()
    print(
        f"env: {env['cpu']}, {env['cores_usable']} cores, GPU {env['gpu'].get('name')}, "
        f"torch {env['versions']['torch']}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(Path(tmp) / "s.zarr", args.samples, args.size)
        loader = StoreLoader(store, args.batch_size, device="cpu", augment=None)
        warm = epoch_time(loader, False, args.interval)[0]  # warm-up: page cache, threads
        epochs = max(1, math.ceil(args.seconds / warm))  # each measurement lasts ~--seconds
        pairs = [
            (
                epoch_time(loader, False, args.interval, epochs),
                epoch_time(loader, True, args.interval, epochs),
            )
            for _ in range(args.repeats)
        ]
    off = statistics.median(p[0][0] for p in pairs)
    on = statistics.median(p[1][0] for p in pairs)
    ratio = statistics.median(p[1][0] / p[0][0] for p in pairs)
    self_share = statistics.median(p[1][1] / p[1][0] for p in pairs)
    cpu_ratio = statistics.median(p[1][2] / p[0][2] for p in pairs)
    n = args.samples * epochs
    print(
        f"loader-only StoreLoader run: {epochs} epochs x {args.samples} samples, {args.size} px,"
        f" batch {args.batch_size}, no augment; {args.repeats} alternating pairs"
    )
    print("  runs (s) without:", " ".join(f"{p[0][0]:.3f}" for p in pairs))
    print("  runs (s) with:   ", " ".join(f"{p[1][0]:.3f}" for p in pairs))
    print(f"  median without monitor: {off:.3f} s ({n / off:.0f} samples/s)")
    print(f"  median with monitor:    {on:.3f} s ({n / on:.0f} samples/s)")
    print(
        f"  median paired ratio with/without: {ratio:.4f} ({100 * (ratio - 1):+.2f}%; "
        "wall-clock, noisy on a shared machine)"
    )
    print(
        f"  median paired ratio of process CPU seconds with/without: {cpu_ratio:.4f} "
        f"({100 * (cpu_ratio - 1):+.2f}%)"
    )
    print(
        f"  monitor thread CPU / run wall time: {100 * self_share:.3f}% of one core "
        f"({100 * self_share / env['cores_usable']:.3f}% of the machine)  (target < 2%)"
    )


if __name__ == "__main__":
    main()
