"""Diagnose your own training loop: is it data-bound, and what to change.

Wrap any iterable of batches (your existing DataLoader)::

    loader = Diagnose(loader)
    for epoch in range(epochs):
        for images, labels in loader:
            train_step(images, labels)
    loader.report().print()

The wrapper times the data wait (time blocked in ``next``) and the compute (time between one
yield and the next request), samples CPU/GPU utilisation with :class:`loaders.monitor.Monitor`
while you train, and prints a verdict against the usual targets plus a recommendation with the
measured reason: precompute a store, decode on the GPU, or the workers/prefetch settings.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from loaders.monitor import Monitor, MonitorResult

__all__ = ["Diagnose", "Diagnosis", "recommend"]

T = TypeVar("T")
CPU_SATURATED = 85.0  # process-tree CPU % of the machine above which the host is the wall


def _batch_len(batch: Any) -> int | None:
    first = batch
    if isinstance(batch, dict):
        first = next(iter(batch.values()), None)
    elif isinstance(batch, (tuple, list)) and batch:
        first = batch[0]
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


@dataclass
class Diagnosis:
    """What the wrapper measured and concluded.

    Attributes:
        steps: Steps measured after warm-up.
        samples_per_s: Delivered samples per second (None if batch sizes are unknown).
        data_wait_share: Share of step time blocked waiting for data.
        step_cv: Coefficient of variation of step times.
        cpu_percent: Mean process-tree CPU use, % of the machine.
        machine_cpu_percent: Mean CPU use of the whole machine (every process), %.
        verdict: ``benchmarks.analysis.verdict`` output.
        recommendation: What to change, with the measured reason.
        note: The monitor's note (e.g. "no GPU: CPU metrics only (...)").
        wait_period_steps: Period, in steps, of recurring data-wait spikes (None if none).
    """

    steps: int
    samples_per_s: float | None
    data_wait_share: float | None
    step_cv: float | None
    cpu_percent: float | None
    machine_cpu_percent: float | None
    verdict: dict[str, Any]
    recommendation: list[str] = field(default_factory=list)
    note: str = ""
    wait_period_steps: float | None = None

    @property
    def bound(self) -> str:
        """``"data"``, ``"compute"`` or ``"unknown"``."""
        return str(self.verdict["bound"])

    def text(self) -> str:
        """Return the human-readable diagnosis."""
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.0%}"

        lines = [f"nostall diagnosis over {self.steps} steps: {self.verdict['summary']}"]
        lines += [f"  {c['name']}: {'n/a' if c['ok'] is None else ('ok' if c['ok'] else 'MISSED')}"
                  f" - {c['detail']}" for c in self.verdict["checks"]]
        sps = "n/a" if self.samples_per_s is None else f"{self.samples_per_s:.1f}"
        cpu = "n/a" if self.cpu_percent is None else f"{self.cpu_percent:.0f}%"
        if self.machine_cpu_percent is not None:
            cpu += f" (all processes: {self.machine_cpu_percent:.0f}%)"
        lines.append(f"  measured: {sps} samples/s, data wait {pct(self.data_wait_share)}, "
                     f"step CV {pct(self.step_cv)}, CPU use of the machine {cpu}")
        if self.wait_period_steps:
            lines.append(f"  data-wait spikes recur every {self.wait_period_steps:.0f} steps "
                         "(batches arrive in bursts, typical of worker processes finishing "
                         "together; a deeper prefetch smooths them)")
        if self.note:
            lines.append(f"  {self.note}")
        lines += [f"  -> {r}" for r in self.recommendation]
        return "\n".join(lines)

    def print(self) -> None:
        """Print :meth:`text`."""
        print(self.text())


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _loader_settings(it: Any) -> dict[str, Any]:
    keys = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
    if not all(hasattr(it, k) for k in keys[:1]):
        return {}
    return {k: getattr(it, k, None) for k in keys}


def recommend(bound: str, share: float | None, cpu_percent: float | None, num_cpus: int,
              loader: dict[str, Any], has_gpu: bool) -> list[str]:
    """Return recommendations for a measured run (pure; see :class:`Diagnose`).

    Args:
        bound: ``data``, ``compute`` or ``unknown`` (from the verdict).
        share: Data-wait share of step time.
        cpu_percent: CPU use of the machine in percent (the busier of this process tree and
            the whole machine: other processes take cores from the loader too).
        num_cpus: Cores of the machine.
        loader: The wrapped loader's ``num_workers``/``prefetch_factor``/... where it has them.
        has_gpu: Whether a GPU was seen.
    """
    if bound == "unknown":
        return ["not enough steps measured to judge; iterate for longer"]
    if bound == "compute":
        return [f"the data pipeline keeps up (data wait {share:.0%} < 30%): the model step is "
                "the bottleneck; no data-loading change needed"]
    cpu = cpu_percent or 0.0
    why = (f"data wait is {share:.0%} of step time and the CPU is {cpu:.0f}% busy "
           f"({num_cpus} cores)")
    workers = loader.get("num_workers")
    if cpu >= CPU_SATURATED:
        out = [f"precompute a store (`precompute build SRC --out STORE`, then StoreLoader): {why}, "
               "so decoding is the wall and more workers cannot help"]
        if has_gpu:
            out.append("or decode on the GPU (gpu-decode: loaders.dali.JpegLoader)")
        return out
    out = []
    if workers is not None and workers < max(1, num_cpus - 1):
        out.append(f"raise num_workers from {workers} to {max(1, num_cpus - 1)} with "
                   "persistent_workers=True, prefetch_factor=4"
                   + (", pin_memory=True" if has_gpu else "") + f": {why}, cores are idle")
    elif workers is not None:
        out.append(f"raise prefetch_factor (now {loader.get('prefetch_factor')}) and set "
                   f"persistent_workers=True: {why}; workers already match the cores")
    else:
        out.append(f"the loader does not use the idle cores ({why}): use parallel workers or "
                   "prefetching, or precompute a store")
    out.append("if that is not enough, precompute a store so epochs skip decoding")
    return out


class Diagnose(Generic[T]):
    """Wraps an iterable of batches and measures data wait vs compute while you iterate.

    Args:
        iterable: Your loader (re-iterable for several epochs, like a DataLoader).
        warmup_steps: Steps at the start excluded from the figures.
        interval: Monitor sampling interval in seconds.
    """

    def __init__(self, iterable: Iterable[T], *, warmup_steps: int = 2,
                 interval: float = 0.1) -> None:
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.iterable = iterable
        self.warmup_steps = warmup_steps
        self.monitor = Monitor(interval)
        self.steps: list[tuple[float, float]] = []
        self.samples: list[int | None] = []
        self._started = False
        self._result: MonitorResult | None = None

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # set_epoch, sampler, dataset, ...
        if name == "iterable":
            raise AttributeError(name)
        return getattr(self.iterable, name)

    def __iter__(self) -> Iterator[T]:
        if not self._started:
            self.monitor.start()
            self._started = True
        it = iter(self.iterable)
        wait: float | None = None
        t_yield = 0.0
        while True:
            t0 = time.perf_counter()
            if wait is not None:
                self._record(wait, t0 - t_yield)
            try:
                item = next(it)
            except StopIteration:
                return
            wait = time.perf_counter() - t0
            self.samples.append(_batch_len(item))
            t_yield = time.perf_counter()
            yield item

    def _record(self, wait: float, compute: float) -> None:
        self.steps.append((wait, compute))
        self.monitor.record_step(wait, compute)

    def __enter__(self) -> Diagnose[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> MonitorResult | None:
        """Stop the monitor (idempotent) and return what it saw."""
        if self._started and self._result is None:
            self._result = self.monitor.stop()
        return self._result

    def report(self) -> Diagnosis:
        """Stop measuring and return the :class:`Diagnosis`."""
        from benchmarks.analysis import (
            coefficient_of_variation,
            data_wait_share,
            dominant_period,
            verdict,
        )

        res = self.close()
        steady = self.steps[self.warmup_steps:]
        n = [s for s in self.samples[self.warmup_steps:len(self.steps)] if s is not None]
        secs = sum(w + c for w, c in steady)
        sps = sum(n) / secs if secs > 0 and len(n) == len(steady) and n else None
        cpu_mean = _mean(res.series("cpu_percent")) if res else None
        machine = _mean(res.series("machine_cpu_percent")) if res else None
        busiest = max((c for c in (cpu_mean, machine) if c is not None), default=None)
        gpu = res.series("gpu_util") if res and res.has_gpu else None
        v = verdict(steady, gpu)
        share = data_wait_share(steady)
        num_cpus = res.num_cpus if res else 1
        rec = recommend(v["bound"], share, busiest, num_cpus,
                        _loader_settings(self.iterable), bool(res and res.has_gpu))
        cv = coefficient_of_variation([w + c for w, c in steady])
        period = dominant_period([w for w, _ in steady], 1.0, min_lag=2)
        return Diagnosis(len(steady), sps, share, cv, cpu_mean, machine, v, rec,
                         res.note if res else "", period)
