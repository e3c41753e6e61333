"""Run strategies one after another on the same data and measure where the time goes.

For each strategy: set up the loader (timed separately as ``setup_s``), then run ``epochs``
epochs under a :class:`loaders.monitor.Monitor`, timing each step's data wait (blocked in
``next``, with the training thread's CPU time there) and compute (the consumer). Throughput
and step statistics count only the steady part, after ``warmup_steps`` steps; samples/s is the
median of the per-epoch rates (each epoch is one run). CPU seconds per sample count the whole
run (start-up included). Each strategy also gets :mod:`loaders.diagnostics`' advice for its own
loader's settings.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.errors import NotApplicable, one_line
from benchmarks.harness.consumers import Consumer
from benchmarks.harness.strategies import Batch, RunConfig, get_strategy
from loaders.diagnostics.advice import advise, explain_stalls
from loaders.diagnostics.analysis import (
    coefficient_of_variation,
    data_wait_share,
    dominant_period,
    verdict,
)
from loaders.diagnostics.diagnose import usable_cores
from loaders.diagnostics.evidence import CpuReading, gather
from loaders.diagnostics.loader_info import describe_loader
from loaders.diagnostics.monitor import Monitor, MonitorResult

__all__ = ["NOT_APPLICABLE", "RunOptions", "mixed", "run_all", "run_strategy", "summarize"]


@dataclass(frozen=True)
class RunOptions:
    """How long and how closely to measure.

    Attributes:
        epochs: Epochs per strategy.
        warmup_steps: Steps at the start excluded from throughput and step statistics.
        interval: Monitor sampling interval in seconds.
        max_steps: Stop each epoch after this many steps (None: whole epochs).
        max_seconds: Start no epoch after this many seconds of the run (the first always
            runs; None: every epoch). Whole epochs only, so the figures stay those of full
            passes; the epochs run are reported as ``epochs_run``.
    """

    epochs: int = 3
    warmup_steps: int = 2
    interval: float = 0.1
    max_steps: int | None = None
    max_seconds: float | None = None


@dataclass
class _Timing:
    steps: int = 0
    samples: int = 0
    warm_t: float | None = None
    warm_samples: int = 0
    end_t: float = 0.0
    first_batch_s: float | None = None
    epochs_run: int = 0
    epoch_rates: list[float] = field(default_factory=list)
    full_epoch_samples: list[int] = field(default_factory=list)  # epochs run to their end
    wait_cpu: list[float] = field(default_factory=list)  # training-thread CPU inside next()
    window: list[CpuReading] = field(default_factory=list)  # CPU at warm-up's end and the end
    pass_starts: list[int] = field(default_factory=list)  # the step each epoch began at


def _reading(mon: Monitor, t: float) -> CpuReading:
    own, children, monitor_s = mon.cpu_split()
    return CpuReading(t, time.thread_time(), own, children, monitor_s, mon.storage_bytes())


def _run_epochs(source: Any, consumer: Consumer, opts: RunOptions, mon: Monitor) -> _Timing:
    tm = _Timing()
    t_start = time.perf_counter()
    if opts.warmup_steps == 0:
        tm.warm_t = t_start
        tm.window.append(_reading(mon, t_start))
    for epoch in range(opts.epochs):
        late = opts.max_seconds is not None and time.perf_counter() - t_start > opts.max_seconds
        if epoch and late:
            break
        tm.epochs_run += 1
        tm.pass_starts.append(tm.steps)
        e_t0, e_n = time.perf_counter(), 0  # measured part of this epoch: after the warm-up
        served = 0  # every sample of this epoch, warm-up included
        it: Iterator[Batch] = source.epoch(epoch)
        for _ in range(opts.max_steps or 1 << 62):
            t0, c0 = time.perf_counter(), time.thread_time()
            batch = next(it, None)
            t1, c1 = time.perf_counter(), time.thread_time()
            if batch is None:
                tm.full_epoch_samples.append(served)
                break
            consumer(*batch)
            t2 = time.perf_counter()
            mon.record_step(t1 - t0, t2 - t1)
            tm.wait_cpu.append(c1 - c0)
            tm.first_batch_s = tm.first_batch_s if tm.first_batch_s is not None else t1 - t_start
            n = int(batch[0].shape[0])
            served += n
            tm.steps += 1
            tm.samples += n
            if tm.steps > opts.warmup_steps:
                e_n += n
            elif tm.steps == opts.warmup_steps:
                tm.warm_t, tm.warm_samples, e_t0 = t2, tm.samples, t2
                tm.window.append(_reading(mon, t2))
        if hasattr(it, "close"):
            it.close()  # a generator stopped at max_steps releases its resources
        if e_n:
            tm.epoch_rates.append(e_n / max(time.perf_counter() - e_t0, 1e-9))
    tm.end_t = time.perf_counter()
    if tm.window:
        tm.window.append(_reading(mon, tm.end_t))
    return tm


def _advice(tm: _Timing, res: MonitorResult, opts: RunOptions, loader: Any) -> dict[str, Any]:
    """Return what :mod:`loaders.diagnostics` advises for this strategy's loader."""
    info = describe_loader(loader)
    steady = res.steps[opts.warmup_steps :]
    window = (tm.window[0], tm.window[-1]) if len(tm.window) == 2 else None
    run, machine = _mean(res.series("cpu_percent")), _mean(res.series("machine_cpu_percent"))
    other = None if run is None or machine is None else max(0.0, machine - run)
    ev = gather(
        steady,
        tm.wait_cpu[opts.warmup_steps :],
        info,
        window,
        cores=usable_cores(),
        has_gpu=res.has_gpu,
        other_cpu_percent=other,
        passes=tm.epochs_run,
        pass_starts=[i - opts.warmup_steps for i in tm.pass_starts[1:]],
    )
    stalls = None  # said only while the step-time target is missed
    if ev.wait_period_steps and ev.unsteady:
        why = explain_stalls(ev.wait_period_steps, info, ev.pass_steps)
        stalls = f"data-wait spikes recur every {ev.wait_period_steps:.0f} steps: {why}"
    return {
        "loader": info.to_dict(),
        "evidence": ev.to_dict(),
        "advice": advise(ev, info),
        "stalls": stalls,
    }


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def summarize(
    name: str,
    tm: _Timing,
    res: MonitorResult,
    opts: RunOptions,
    num_samples: int,
    loader: Any = None,
) -> dict[str, Any]:
    """Turn one strategy's timings and monitor result into the report's figures.

    ``epoch_s`` is the samples one whole epoch served (measured; ``num_samples`` when
    ``max_steps`` cut every epoch short) over the steady samples/s. ``advice`` is what
    :mod:`loaders.diagnostics` advises for ``loader`` (the strategy's own loader).
    """
    steady = res.steps[opts.warmup_steps :] or res.steps
    if tm.warm_t is None:  # fewer steps than the warm-up: measure everything
        tm.warm_t, tm.warm_samples = tm.end_t - res.wall_s, 0
    samples = tm.samples - tm.warm_samples
    secs = tm.end_t - tm.warm_t
    overall = samples / secs if secs > 0 and samples > 0 else None
    sps = float(np.median(tm.epoch_rates)) if tm.epoch_rates else overall
    util = res.series("gpu_util") if res.has_gpu else res.series("cpu_percent")
    step_s = [w + c for w, c in steady]
    # what an epoch serves (drop_last leaves out the last partial batch), not the dataset size
    served = tm.full_epoch_samples[0] if tm.full_epoch_samples else num_samples
    advice = _advice(tm, res, opts, loader)
    return {
        "name": name,
        "status": "ok",
        "samples": samples,
        "steps": len(steady),
        "epochs_run": tm.epochs_run,
        "samples_per_s": sps,  # median over epochs (each epoch after the warm-up is a run)
        "samples_per_s_epochs": tm.epoch_rates,
        "samples_per_s_overall": overall,
        "epoch_samples": served,
        "epoch_s": served / sps if sps else None,
        "first_batch_s": tm.first_batch_s,
        "data_wait_share": data_wait_share(steady),
        "step_cv": coefficient_of_variation(step_s),
        "step_ms_median": float(np.median(step_s) * 1e3) if step_s else None,
        "step_ms_p95": float(np.percentile(step_s, 95) * 1e3) if step_s else None,
        "util_source": "gpu_util" if res.has_gpu else "cpu_percent",
        "oscillation_period_s": dominant_period(util, opts.interval),
        # stalls that recur every N steps (e.g. N = num_workers finishing in lockstep)
        "wait_period_steps": advice["evidence"]["wait_period_steps"],
        # whole run incl. warm-up: work prefetched during warm-up is not lost from the count
        "cpu_s_per_sample": res.cpu_s / tm.samples if tm.samples > 0 else None,
        "peak_rss_bytes": res.peak_rss_bytes,
        "cpu_percent_mean": _mean(res.series("cpu_percent")),
        "machine_cpu_percent_mean": _mean(res.series("machine_cpu_percent")),
        "monitor_cpu_share": res.self_cpu_s / res.wall_s if res.wall_s > 0 else None,
        "verdict": verdict(steady, res.series("gpu_util") if res.has_gpu else None),
        **advice,
        "monitor": res.to_dict(),
    }


NOT_APPLICABLE = "not applicable"


def mixed(source: Any, cfg: RunConfig) -> Any:
    """``source`` with its batches mixed, where ``--mixup`` asks and its loader does not mix."""
    if not cfg.mixup or getattr(source, "mixes", False):
        return source
    from benchmarks.harness.sources import num_classes
    from benchmarks.harness.strategies.epochs import MixedSource

    return MixedSource(source, cfg.mixup, num_classes(cfg.plan), cfg.seed)


def run_strategy(name: str, cfg: RunConfig, consumer: Consumer, opts: RunOptions) -> dict[str, Any]:
    """Run one strategy and return its figures, or its status and why it has none.

    The status is ``ok``, ``unavailable`` (its backend is missing here), ``not applicable``
    (it cannot take this kind of data, with the reason) or ``failed``.
    """
    strategy = get_strategy(name)
    reason = strategy.unavailable(cfg)
    if reason is not None:
        return {"name": name, "status": "unavailable", "reason": reason}
    t0 = time.perf_counter()
    try:
        source = strategy.open(cfg)
    except NotApplicable as exc:
        return {"name": name, "status": NOT_APPLICABLE, "reason": str(exc)}
    except Exception as exc:
        return _failed(name, "setup", exc)
    source = mixed(source, cfg)
    setup_s = time.perf_counter() - t0
    try:
        with Monitor(opts.interval) as mon:
            tm = _run_epochs(source, consumer, opts, mon)
        if not tm.samples:  # nothing measured: never "ok" with figures of no batch
            return {
                "name": name,
                "status": "failed",
                "reason": f"run: it served no batch of {cfg.batch_size} in {opts.epochs} "
                f"epoch(s) of {source.num_samples} samples (a smaller --batch-size)",
            }
        out = summarize(
            name, tm, mon.result(), opts, source.num_samples, getattr(source, "loader", source)
        )
    except Exception as exc:
        return _failed(name, "run", exc)
    finally:
        source.close()
        gc.collect()
    out["setup_s"] = setup_s
    out["description"] = getattr(source, "description", None) or strategy.describe(cfg)
    out["note"] = getattr(source, "note", None)
    return out


def _failed(name: str, stage: str, exc: BaseException) -> dict[str, Any]:
    """``status: failed`` with a one-line reason (the traceback kept apart).

    An error carrying a traceback in its text (a DataLoader worker's) is reported by its last
    line, which names the error and the file; a TensorFlow error by its message, without the
    graph's annotations (:func:`benchmarks.errors.one_line`).
    """
    return {
        "name": name,
        "status": "failed",
        "reason": f"{stage}: {one_line(exc)}",
        "traceback": traceback.format_exc(limit=6),
    }


def run_all(
    names: list[str], cfg: RunConfig, consumer: Consumer, opts: RunOptions
) -> list[dict[str, Any]]:
    """Run ``names`` one after another; never stops at a failing strategy."""
    return [run_strategy(name, cfg, consumer, opts) for name in names]
