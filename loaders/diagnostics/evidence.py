"""The evidence advice is based on: step timings, and the CPU of the work that loads.

The CPU figures measure the loader's own work, per place it runs, never the machine's busy
percentage (which counts other processes and idle-spinning intra-op threads of the training step):

* ``wait_busy``: the training thread's CPU time inside ``next()`` / the wall time of the wait.
  High: the thread decodes the batch itself; low: it waits (I/O latency, or a helper).
* ``storage_bytes``: the bytes the process tree fetched from storage meanwhile (the kernel's
  count: page-cache hits and reads from memory add nothing), so that advice says the loader
  waits on storage only when it read from it.
* ``helper_cores``: cores kept busy by the loader's helpers over the measured window: the
  DataLoader's worker processes (CPU of the child processes), or, for loaders that load on
  threads of this process (StoreLoader, DALI, ``loaders.tf``, ``loaders.jax``, ``tf.data``):
  every thread but the training thread and the monitor's (which includes the training step's
  own intra-op threads, if it has any).

And what a new pass over the loader costs: the extra wait of the first step of each pass
after the first (a new ``tf.data`` iterator, DataLoader workers started again), over the
median wait (``pass_start_s``) and as a share of the whole data wait (``pass_start_share``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from loaders.diagnostics.analysis import (
    DATA_WAIT_MAX,
    STEP_CV_MAX,
    coefficient_of_variation,
    data_wait_share,
    dominant_period,
)
from loaders.diagnostics.loader_info import DATALOADER, THREADED, LoaderInfo

__all__ = ["CpuReading", "Evidence", "gather", "stall_size"]


@dataclass(frozen=True)
class CpuReading:
    """Cumulative CPU seconds at one moment.

    Attributes:
        t: The diagnosis clock, seconds.
        thread_s: CPU of the training thread.
        process_s: CPU of this process (every thread).
        children_s: CPU of the descendant processes (DataLoader workers).
        monitor_s: CPU of the monitor's sampling thread.
        storage_bytes: Bytes the process tree fetched from storage (page-cache hits and
            reads from memory do not count; None where the platform does not count them).
    """

    t: float
    thread_s: float
    process_s: float
    children_s: float
    monitor_s: float
    storage_bytes: int | None = None


@dataclass(frozen=True)
class Evidence:
    """What advice needs, measured over the steady steps (after warm-up).

    Attributes:
        steps: Steady steps.
        share: Data-wait share of step time.
        step_cv: Coefficient of variation of step times.
        median_step_s: Median step time.
        wait_period_steps: Period in steps of recurring data-wait spikes, or None.
        stall_s: How much longer than the median wait a spike step waits, on average.
        wait_busy: Training-thread CPU share of the data wait (None if not measured).
        helper_cores: Cores used by the loader's workers or threads (None if not measured).
        cores: Cores the loader may use.
        has_gpu: Whether a GPU was seen.
        other_cpu_percent: Machine CPU % used by other processes (None if not measured).
        passes: Passes (epochs) over the loader started.
        wait_varies: Whether the data waits vary more than the compute times (std).
        pass_start_s: Mean extra wait of a pass's first step (passes after the first).
        pass_start_share: Those extra waits over the whole data wait.
        storage_bytes: Bytes fetched from storage over the steady steps (None: not measured):
            the evidence that the loader waited on a disk rather than on memory.
        pass_steps: Steps of one whole pass over the loader (the median of the passes the
            steady steps hold whole); None with fewer than two passes.
    """

    steps: int
    share: float | None
    step_cv: float | None
    median_step_s: float | None
    wait_period_steps: float | None
    stall_s: float | None
    wait_busy: float | None
    helper_cores: float | None
    cores: int
    has_gpu: bool
    other_cpu_percent: float | None = None
    passes: int = 1
    wait_varies: bool = False
    pass_start_s: float | None = None
    pass_start_share: float | None = None
    storage_bytes: int | None = None
    pass_steps: float | None = None

    @property
    def data_bound(self) -> bool:
        """Whether the data wait reaches the target's limit."""
        return self.share is not None and self.share >= DATA_WAIT_MAX

    @property
    def unsteady(self) -> bool:
        """Whether the step-time variation misses its target."""
        return self.step_cv is not None and self.step_cv >= STEP_CV_MAX

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)


def stall_size(waits: Sequence[float]) -> float | None:
    """Return the mean excess wait of spike steps over the median wait (None without spikes).

    A spike step waits more than halfway from the median to the longest wait.
    """
    arr = np.asarray(waits, dtype=np.float64)
    if arr.size < 2:
        return None
    med = float(np.median(arr))
    top = float(arr.max())
    if top <= med:
        return None
    spikes = arr[arr > med + (top - med) / 2]
    return float(spikes.mean() - med)


def _helper_cores(info: LoaderInfo, a: CpuReading, b: CpuReading) -> float | None:
    wall = b.t - a.t
    if wall <= 0:
        return None
    if info.kind == DATALOADER:
        return max(0.0, b.children_s - a.children_s) / wall
    if info.kind in THREADED:
        process = b.process_s - a.process_s
        others = process - (b.thread_s - a.thread_s) - (b.monitor_s - a.monitor_s)
        return max(0.0, others) / wall
    return None


def gather(
    steps: Sequence[tuple[float, float]],
    wait_cpu: Sequence[float],
    info: LoaderInfo,
    window: tuple[CpuReading, CpuReading] | None,
    *,
    cores: int,
    has_gpu: bool,
    other_cpu_percent: float | None = None,
    passes: int = 1,
    pass_starts: Sequence[int] = (),
) -> Evidence:
    """Turn the steady steps and CPU readings into :class:`Evidence`.

    Args:
        steps: Steady ``(data_wait_s, compute_s)`` per step.
        wait_cpu: Training-thread CPU seconds inside ``next()``, per steady step.
        info: The wrapped loader.
        window: CPU readings at the start and end of the steady steps, if taken.
        cores: Cores the loader may use.
        has_gpu: Whether a GPU was seen.
        other_cpu_percent: Machine CPU % used by other processes.
        passes: Passes over the loader started.
        pass_starts: Indices into ``steps`` of the first step of each pass after the first.
    """
    waits = [w for w, _ in steps]
    step_s = [w + c for w, c in steps]
    wait_total = sum(waits)
    busy = min(1.0, sum(wait_cpu) / wait_total) if wait_total > 0 and wait_cpu else None
    helpers = _helper_cores(info, *window) if window else None
    start_s, start_share = _pass_starts(waits, pass_starts)
    return Evidence(
        steps=len(steps),
        share=data_wait_share(steps),
        step_cv=coefficient_of_variation(step_s),
        median_step_s=float(np.median(step_s)) if step_s else None,
        wait_period_steps=dominant_period(waits, 1.0, min_lag=2),
        stall_s=stall_size(waits),
        wait_busy=busy,
        helper_cores=helpers,
        cores=cores,
        has_gpu=has_gpu,
        other_cpu_percent=other_cpu_percent,
        passes=passes,
        wait_varies=bool(steps) and float(np.std(waits)) > float(np.std([c for _, c in steps])),
        pass_start_s=start_s,
        pass_start_share=start_share,
        storage_bytes=_storage_bytes(*window) if window else None,
        pass_steps=_pass_steps(len(steps), pass_starts),
    )


def _pass_steps(steps: int, starts: Sequence[int]) -> float | None:
    """The median steps of the passes that begin at ``starts`` (the last ends at ``steps``)."""
    inside = [s for s in starts if 0 <= s < steps]
    if not inside:
        return None
    lengths = np.diff([*inside, steps])
    return float(np.median(lengths))


def _storage_bytes(a: CpuReading, b: CpuReading) -> int | None:
    if a.storage_bytes is None or b.storage_bytes is None:
        return None
    return max(0, b.storage_bytes - a.storage_bytes)


def _pass_starts(
    waits: Sequence[float], starts: Sequence[int]
) -> tuple[float | None, float | None]:
    """Mean extra wait of the passes' first steps over the median wait, and its share."""
    first = [waits[i] for i in starts if 0 <= i < len(waits)]
    total = sum(waits)
    if not first or total <= 0:
        return None, None
    med = float(np.median(waits))
    extra = [max(0.0, w - med) for w in first]
    return float(np.mean(extra)), float(sum(extra) / total)
