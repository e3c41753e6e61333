"""Interleaved measurement: every row once per round (A B C A B C ...), warm-up rounds first.

Taking turns round by round, the rows see the same drift of the machine (other load, clock
speed, page cache), so their ratios hold even when their absolute figures move. Each call
gives a :class:`Sample` of figures; a :class:`RowResult` keeps a row's samples in round order
(for paired ratios) and summarises each figure by min / median / max.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks.runner.rows import CLOCKS, Command, Row, Run

__all__ = ["Results", "RowResult", "Sample", "call_command", "call_row", "measure"]

ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the benchmarks package


@dataclass(frozen=True)
class Sample:
    """One call of a row: its round and figures (numbers), and any other values it reported."""

    index: int
    figures: Mapping[str, float]
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RowResult:
    """A row's samples, warm-up rounds apart, in round order."""

    name: str
    unit: str
    show: tuple[str, ...]
    warmup: list[Sample] = field(default_factory=list)
    runs: list[Sample] = field(default_factory=list)

    def values(self, figure: str) -> list[float]:
        """The figure of every timed run, in round order."""
        return [s.figures[figure] for s in self.runs]

    def min(self, figure: str) -> float:
        """The smallest value of ``figure`` over the timed runs."""
        return min(self.values(figure))

    def median(self, figure: str) -> float:
        """The median of ``figure`` over the timed runs."""
        return float(statistics.median(self.values(figure)))

    def max(self, figure: str) -> float:
        """The largest value of ``figure`` over the timed runs."""
        return max(self.values(figure))

    def figures(self) -> list[str]:
        """Names of the figures every timed run has, in the order of the first."""
        first = self.runs[0].figures if self.runs else {}
        return [f for f in first if all(f in s.figures for s in self.runs)]


Results = dict[str, RowResult]


def _figures(wall: float, cpu: float, count: int, own: Mapping[str, float]) -> dict[str, float]:
    per = max(count, 1)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "count": float(count),
        "rate": count / wall if wall > 0 else float("nan"),
        "ms": 1e3 * wall / per,
        "cpu_ms": 1e3 * cpu / per,
        **own,
    }


def call_row(row: Row, index: int) -> Sample:
    """Call ``row``'s body once; time it by wall clock and its CPU clock, less untimed parts."""
    clock = CLOCKS[row.clock]
    run = Run(index, clock)
    c0, t0 = clock(), time.perf_counter()
    count = row.body(run)
    wall = time.perf_counter() - t0 - run.untimed_wall
    cpu = clock() - c0 - run.untimed_cpu
    return Sample(index, _figures(wall, cpu, count, run.figures))


class _TreeRss:
    """Samples the summed RSS of a process and its descendants every 50 ms; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.proc, self.peak, self.procs = psutil.Process(pid), 0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            total, count = self._tree()
            if total > self.peak:
                self.peak, self.procs = total, count
            time.sleep(0.05)

    def _tree(self) -> tuple[int, int]:
        total = count = 0
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:  # the process has exited
            return 0, 0
        for p in procs:
            try:
                total += p.memory_info().rss
                count += 1
            except psutil.Error:
                continue
        return total, count

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        return {"tree_peak_rss_mib": self.peak / 2**20, "procs": float(self.procs)}


def _child_env(cmd: Command) -> dict[str, str]:
    env = dict(os.environ if cmd.env is None else cmd.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    return env


def call_command(cmd: Command, index: int) -> Sample:
    """Run ``cmd`` in a fresh interpreter; wall seconds around it, CPU from its rusage."""
    if cmd.before is not None:
        cmd.before()
    argv = [sys.executable, "-m", "benchmarks.runner.child", cmd.target, *cmd.args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=_child_env(cmd))
    tree = _TreeRss(proc.pid) if cmd.memory else None
    stdout = proc.stdout.read() if proc.stdout is not None else b""  # until the child exits
    own = tree.stop() if tree is not None else {}
    _, status, usage = os.wait4(proc.pid, 0)  # the child and the descendants it reaped
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{cmd.name}: the child process failed with exit code {proc.returncode}")
    lines = stdout.decode().strip().splitlines()
    reported: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    numbers = {k: float(v) for k, v in reported.items() if _is_number(v)}
    extra = {k: v for k, v in reported.items() if k not in numbers}
    figures = _figures(wall, usage.ru_utime + usage.ru_stime, 1, {**numbers, **own})
    return Sample(index, figures, extra)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def measure(
    rows: Sequence[Row | Command], runs: int, warmup: int = 1, interleave: bool = True
) -> Results:
    """Call every row once per round, in turn: ``warmup`` rounds, then ``runs`` timed ones.

    With ``interleave=False`` each row runs all its rounds before the next row starts (A A B B):
    for rows that work ahead in the background between their turns (a DALI pipeline fills its
    prefetch queue as soon as an epoch ends), which taking turns would favour.

    Raises:
        ValueError: two rows share a name, or ``runs`` < 1 or ``warmup`` < 0.
    """
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise ValueError(f"rows must have distinct names, got {names}")
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs} warmup={warmup}")
    results = {r.name: RowResult(r.name, r.unit, r.show) for r in rows}
    rounds = range(warmup + runs)
    calls = (
        [(i, row) for i in rounds for row in rows]
        if interleave
        else [(i, row) for row in rows for i in rounds]
    )
    for index, row in calls:
        sample = call_row(row, index) if isinstance(row, Row) else call_command(row, index)
        got = results[row.name]
        (got.warmup if index < warmup else got.runs).append(sample)
    return results
