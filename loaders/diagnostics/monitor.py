"""A light resource monitor: GPU (pynvml) and host (psutil) samples, plus per-step timings.

Use it on its own around any piece of work::

    with Monitor(interval=0.1) as mon:
        for batch in loader:
            ...
            mon.record_step(data_wait_s, compute_s)
    result = mon.result()

A background thread samples at ``interval`` seconds: host CPU utilisation and the resident
memory (RSS) of this process and all its children (DataLoader workers, DALI threads live in the
process already) through psutil, always; GPU utilisation, memory and power through pynvml when
NVML and a GPU are present. Without them the result says ``"no GPU: CPU metrics only"`` with
the NVML reason, and every GPU field is ``None``: GPU numbers are never invented.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from loaders.diagnostics.monitor_probes import GpuProbe, ProcessTree

__all__ = ["GpuProbe", "Monitor", "MonitorResult", "ProcessTree", "Sample"]

NO_GPU = "no GPU: CPU metrics only"


@dataclass(frozen=True)
class Sample:
    """One monitor sample.

    Attributes:
        t: Seconds since the monitor started.
        cpu_percent: Process-tree CPU use as a percentage of the whole machine (0-100).
        rss_bytes: Resident memory of the process tree.
        machine_cpu_percent: CPU use of the whole machine, every process (0-100).
        gpu_util: GPU utilisation percent, or None without a GPU.
        gpu_mem_bytes: GPU memory used, or None.
        gpu_power_w: GPU power draw in watts, or None.
    """

    t: float
    cpu_percent: float
    rss_bytes: int
    machine_cpu_percent: float = 0.0
    gpu_util: float | None = None
    gpu_mem_bytes: int | None = None
    gpu_power_w: float | None = None


@dataclass
class MonitorResult:
    """What a monitor saw.

    Attributes:
        samples: Time series of :class:`Sample`.
        steps: Per-step ``(data_wait_s, compute_s)``.
        wall_s: Seconds between start and stop.
        cpu_s: CPU seconds used by the process tree while monitored.
        peak_rss_bytes: Highest process-tree RSS sampled.
        gpu: GPU name, or None.
        gpu_driver: Driver version, or None.
        note: ``"no GPU: CPU metrics only (...)"`` when there is no GPU, else ``""``.
        num_cpus: Logical cores the percentages are relative to.
        self_cpu_s: CPU seconds the sampling thread itself used (the monitor's overhead).
    """

    samples: list[Sample] = field(default_factory=list)
    steps: list[tuple[float, float]] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_bytes: int = 0
    gpu: str | None = None
    gpu_driver: str | None = None
    note: str = ""
    num_cpus: int = 1
    self_cpu_s: float = 0.0

    @property
    def has_gpu(self) -> bool:
        """Whether GPU series were sampled."""
        return self.gpu is not None

    def series(self, name: str) -> list[float | None]:
        """Return one field of every sample, e.g. ``series("gpu_util")``."""
        return [getattr(s, name) for s in self.samples]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary (series included)."""
        return {
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "peak_rss_bytes": self.peak_rss_bytes,
            "gpu": self.gpu,
            "gpu_driver": self.gpu_driver,
            "note": self.note,
            "num_cpus": self.num_cpus,
            "self_cpu_s": self.self_cpu_s,
            "interval_s": _median_dt(self.samples),
            "series": {k: self.series(k) for k in Sample.__dataclass_fields__},
            "steps": [list(s) for s in self.steps],
        }


def _median_dt(samples: list[Sample]) -> float | None:
    if len(samples) < 2:
        return None
    dts = sorted(b.t - a.t for a, b in itertools.pairwise(samples))
    return dts[len(dts) // 2]


class Monitor:
    """Samples host and GPU use on a daemon thread; records per-step timings.

    Args:
        interval: Seconds between samples (0.1 = 10 Hz).
        gpu_index: NVML index of the GPU to watch.
        gpu: Set False to skip NVML entirely.
        refresh_s: Seconds between re-listings of child processes (listing scans the machine).
    """

    def __init__(
        self, interval: float = 0.1, *, gpu_index: int = 0, gpu: bool = True, refresh_s: float = 0.2
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self.interval = interval
        self._probe = GpuProbe(gpu_index) if gpu else None
        self._tree = ProcessTree(os.getpid(), refresh_s)
        self._ncpu = psutil.cpu_count() or 1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._base_cpu = 0.0
        self._self_cpu = 0.0
        self._t0 = 0.0
        self._result = MonitorResult(num_cpus=self._ncpu)

    def start(self) -> Monitor:
        """Start sampling (idempotent only via a new Monitor)."""
        if self._thread is not None:
            raise RuntimeError("Monitor already started; create a new one")
        self._t0 = time.perf_counter()
        self._base_cpu = self._tree_cpu()
        self._last = (self._t0, self._base_cpu)
        psutil.cpu_percent(interval=None)  # starts the machine-wide counter
        self._thread = threading.Thread(target=self._run, name="nostall-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MonitorResult:
        """Stop sampling, take one last sample and return the result."""
        if self._thread is None:
            raise RuntimeError("Monitor was never started")
        self._stop.set()
        self._thread.join()
        self._sample()
        res = self._result
        res.wall_s = time.perf_counter() - self._t0
        res.cpu_s = self.cpu_seconds()
        self._describe_gpu(res)
        return res

    def _describe_gpu(self, res: MonitorResult) -> None:
        probe = self._probe
        if probe is not None and probe.available:
            res.gpu, res.gpu_driver = probe.name, probe.driver
        else:
            why = probe.reason if probe is not None else "GPU sampling disabled"
            res.note = f"{NO_GPU} ({why})"

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record_step(self, data_wait_s: float, compute_s: float) -> None:
        """Record one training step: time blocked waiting for data, and time computing."""
        self._result.steps.append((data_wait_s, compute_s))

    def cpu_seconds(self) -> float:
        """Return CPU seconds used by the process tree since :meth:`start` (callable any time).

        Lists the child processes afresh, so it is exact for children alive at the call.
        """
        return self._read_tree(relist=True)[0] - self._base_cpu

    def cpu_split(self) -> tuple[float, float, float]:
        """Return cumulative CPU seconds of (this process, its descendants, the sampling thread).

        Lists the child processes afresh; descendants that exited count with the CPU time last
        seen of them. Unlike :meth:`cpu_seconds` the figures are not relative to :meth:`start`.
        """
        with self._lock:
            total = self._tree.read(relist=True)[0]
            children = self._tree.children_seconds()
        return total - children, children, self._self_cpu

    def storage_bytes(self) -> int | None:
        """Return the bytes the process tree has fetched from storage so far (None: unknown).

        Page-cache hits and reads from memory do not count (:meth:`ProcessTree.storage_bytes`).
        """
        with self._lock:
            return self._tree.storage_bytes()

    def _tree_cpu(self) -> float:
        return self._read_tree()[0]

    def _read_tree(self, relist: bool = False) -> tuple[float, int]:
        with self._lock:
            return self._tree.read(relist)

    def result(self) -> MonitorResult:
        """Return the result (complete after :meth:`stop`)."""
        return self._result

    def _run(self) -> None:
        t0 = time.thread_time()
        while not self._stop.wait(self.interval):
            self._sample()
            self._self_cpu = time.thread_time() - t0
        self._result.self_cpu_s = self._self_cpu = time.thread_time() - t0

    def _sample(self) -> None:
        now = time.perf_counter()
        cpu, rss = self._read_tree()
        t_last, cpu_last = self._last
        self._last = (now, cpu)
        pct = 100.0 * (cpu - cpu_last) / max(now - t_last, 1e-9) / self._ncpu
        util, mem, power = self._probe.read() if self._probe else (None, None, None)
        res = self._result
        machine = psutil.cpu_percent(interval=None)
        res.samples.append(Sample(now - self._t0, min(pct, 100.0), rss, machine, util, mem, power))
        res.peak_rss_bytes = max(res.peak_rss_bytes, rss)
