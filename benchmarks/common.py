"""Helpers shared by the benchmark scripts: a reference crop, tree CPU time, interleaved timing.

:func:`interleaved` is the timing loop of the scripts that compare rows side by side: a warm-up
round, then every row once per round, medians.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from PIL import Image

__all__ = [
    "Clock",
    "Row",
    "aten_op_counts",
    "center_crop",
    "interleaved",
    "timed_call",
    "tree_cpu_seconds",
]

# A row of a timing table: called with the epoch (round) number, returns the samples it produced.
Row = Callable[[int], int]
# A CPU clock in seconds (e.g. tree_cpu_seconds, or time.process_time for this process only).
Clock = Callable[[], float]


def center_crop(path: str | Path, size: int) -> np.ndarray:
    """Decode ``path`` (Pillow), resize the short side to ``size`` (bilinear), crop the centre."""
    with Image.open(path) as im:
        img = im.convert("RGB")
    scale = size / min(img.size)
    w, h = max(size, round(img.width * scale)), max(size, round(img.height * scale))
    img = img.resize((w, h), Image.Resampling.BILINEAR)
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)))


def store_bytes(store: Path, array: str = "image") -> int:
    """Bytes of the files of ``array`` in the local store ``store`` (its shard files)."""
    return sum(f.stat().st_size for f in (store / array).rglob("*") if f.is_file())


def peak_rss_mib() -> float:
    """This process's peak RSS in MiB, since it started its program.

    On Linux ``VmHWM`` of ``/proc/self/status``: the peak of this process's own memory map.
    ``getrusage(RUSAGE_SELF).ru_maxrss`` is not that in a child started by ``subprocess``: Linux
    carries the peak of the forked copy of the parent (its whole RSS) across ``execve``, so a
    child of a large parent reports the parent's size. Elsewhere ``ru_maxrss`` (KiB on Linux,
    bytes on macOS).
    """
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def tree_cpu_seconds() -> float:
    """Return user+system CPU seconds of this process, its reaped children and live descendants.

    Reaped children (pool or DataLoader workers that exited) count through this process's
    ``children_user``/``children_system`` times; live ones (Ray, running workers) one by one.
    """
    me = psutil.Process()
    total = float(sum(me.cpu_times()[:4]))  # user, system, children_user, children_system
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a worker may exit meanwhile
            total += float(sum(child.cpu_times()[:2]))
    return total


def aten_op_counts(fn: Callable[[], Any]) -> dict[str, int]:
    """Run ``fn`` under the torch profiler (CPU) and count the aten ops it dispatched, by name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    counts: dict[str, int] = {}
    for event in prof.events():
        if event.name.startswith("aten::"):
            counts[event.name] = counts.get(event.name, 0) + 1
    return counts


def timed_call(row: Row, epoch: int, clock: Clock = tree_cpu_seconds) -> tuple[float, float]:
    """Call ``row(epoch)`` once; return (samples/s, CPU seconds/sample by ``clock``)."""
    c0, t0 = clock(), time.perf_counter()
    n = row(epoch)
    wall, cpu = time.perf_counter() - t0, clock() - c0
    return n / wall, cpu / n


def interleaved(
    rows: Mapping[str, Row], runs: int, clocks: Mapping[str, Clock] | None = None
) -> dict[str, tuple[float, float]]:
    """Time ``rows`` side by side; return each row's median (samples/s, CPU seconds/sample).

    Round 0 warms every row up (untimed results); then ``runs`` rounds in which the rows take
    turns, one call each (A B A B ...), so that a change in the host's load hits every row
    alike. Round ``e`` calls each row with ``e`` (its epoch). CPU time is read from the row's
    clock in ``clocks`` (default :func:`tree_cpu_seconds`).
    """
    clocks = clocks or {}
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    for epoch in range(runs + 1):
        for name, row in rows.items():
            timing = timed_call(row, epoch, clocks.get(name, tree_cpu_seconds))
            if epoch > 0:
                got[name].append(timing)
    return {
        name: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
        for name, v in got.items()
    }
