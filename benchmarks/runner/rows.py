"""What a benchmark times: rows run in this process and rows run as a fresh child process.

A :class:`Row` is a timed body (its data set up before, outside the timed part); its
:class:`Run` lets the body leave parts out of the timing (``with run.untimed(): ...``) and
record figures of its own. A :class:`Command` is a function run in a fresh interpreter
(:mod:`benchmarks.runner.child`): wall seconds around the whole process, the child's CPU
seconds from its rusage, its own peak RSS, and optionally the peak RSS of its process tree.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import psutil

__all__ = ["CLOCKS", "Clock", "Command", "Row", "Run", "tree_cpu_seconds"]

Clock = Literal["process", "tree", "thread"]


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


# ``process``: this process, all threads (nanoseconds); ``tree``: with its worker processes
# (scheduler ticks); ``thread``: the calling thread only, so descheduled time does not count.
CLOCKS: dict[str, Callable[[], float]] = {
    "process": time.process_time,
    "tree": tree_cpu_seconds,
    "thread": time.thread_time,
}


class Run:
    """One call of a row: its round, the parts it leaves out of the timing, its own figures.

    Args:
        index: the round, from 0 (the warm-up rounds come first).
        cpu: the row's CPU clock, so that untimed parts leave out CPU time too.
    """

    def __init__(self, index: int, cpu: Callable[[], float]) -> None:
        self.index = index
        self.figures: dict[str, float] = {}
        self.untimed_wall = self.untimed_cpu = 0.0
        self._cpu = cpu

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """Leave the wall and CPU seconds of the ``with`` block out of this call's timing."""
        c0, t0 = self._cpu(), time.perf_counter()
        try:
            yield
        finally:
            self.untimed_wall += time.perf_counter() - t0
            self.untimed_cpu += self._cpu() - c0

    def record(self, figure: str, value: float) -> None:
        """Record a figure of this call (e.g. requests per sample) next to the timings."""
        self.figures[figure] = float(value)


@dataclass(frozen=True)
class Row:
    """A body timed in this process.

    Attributes:
        name: the row's label in the table and the JSON.
        body: called once per round with its :class:`Run`; returns how many ``unit`` it made.
        clock: the CPU clock: ``process``, ``tree`` (with worker processes) or ``thread``.
        unit: what the body counts (``sample``, ``image``, ``call``): rates are per unit.
        show: the figures printed in the table (all are in the JSON).
    """

    name: str
    body: Callable[[Run], int]
    clock: Clock = "process"
    unit: str = "sample"
    show: tuple[str, ...] = ("rate", "cpu_ms")


@dataclass(frozen=True)
class Command:
    """A function run in a fresh Python process, once per round.

    Attributes:
        name: the row's label.
        target: ``"package.module:function"``; called with ``args`` (strings), it may return
            a mapping of figures (numbers; other values are kept as they are in the JSON).
            An ``imports_s`` it returns (its own lazy imports) counts as import time.
        args: the function's arguments.
        env: the child's whole environment (default: this process's).
        before: called here before each run, untimed (e.g. removing the last run's output).
        memory: also sample the peak RSS of the child's whole process tree every 50 ms
            (``tree_peak_rss_mib``, ``procs``); the child's own peak (``peak_rss_mib``,
            its ``VmHWM``) is always recorded.
        show: the figures printed in the table.
    """

    name: str
    target: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    before: Callable[[], None] | None = None
    memory: bool = False
    show: tuple[str, ...] = ("wall_s", "cpu_s", "peak_rss_mib")
    unit: str = "run"
