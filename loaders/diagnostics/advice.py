"""Advice from evidence: what to change in *this* loader, and the measured reason.

Pure functions of :class:`~loaders.diagnostics.evidence.Evidence` and
:class:`~loaders.diagnostics.loader_info.LoaderInfo`. The rules:

* data-bound: say where the loading runs and whether it computes or waits, then the change that
  adds what is missing: parallel workers/threads up to the cores when they compute, more of
  them than cores when they wait on I/O, a store (or GPU decoding) when the cores are full;
* recurring stalls that make the step time vary: explain them by what the loader has and
  prefetch deep enough to absorb them, whatever the bound;
* a new iterator each pass that costs a share of the wait (``tf.data`` under Keras ``fit``):
  one iterator for every epoch;
* only changes: a setting already at the advised value is never advised; a loader that reads
  a store is never told to precompute one.

The store loaders, DALI and ``tf.data`` pipelines have theirs in :mod:`.advice_loaders`.
"""

from __future__ import annotations

from loaders.diagnostics.advice_loaders import (
    BUSY_CPU,
    OTHERS_BUSY,
    STORE,
    dali,
    pass_starts,
    store_family,
    tf_data,
)
from loaders.diagnostics.advice_loaders import gain as _gain
from loaders.diagnostics.analysis import DATA_WAIT_MAX, STEP_CV_MAX
from loaders.diagnostics.evidence import Evidence
from loaders.diagnostics.loader_info import (
    DALI,
    DATALOADER,
    STORE_FAMILY,
    TF_DATA,
    LoaderInfo,
)
from loaders.diagnostics.stalls import explain_stalls, stall_advice

__all__ = ["BUSY_CPU", "FULL_CORES", "OTHERS_BUSY", "advise", "explain_stalls"]

FULL_CORES = 0.8  # helpers using this share of the cores leave no core for more of them


def advise(ev: Evidence, info: LoaderInfo) -> list[str]:
    """Return the recommendations for a measured run, most useful first."""
    if ev.share is None or ev.steps < 2:
        return ["not enough steps measured to judge; iterate for longer"]
    restarts = pass_starts(ev, info)
    first = restarts is not None and (ev.pass_start_share or 0.0) >= 0.5  # most of the wait
    out = [restarts] if restarts and first else []
    out += _data_bound(ev, info) if ev.data_bound else []
    out += [restarts] if restarts and not first else []
    stalls = stall_advice(ev, info, advised_restarts=restarts is not None)
    if stalls and restarts and _same(ev.stall_s, ev.pass_start_s):
        stalls = None  # the stalls are the passes' new iterators, advised on above
    if stalls:
        out.append(stalls)
    if not out and ev.unsteady and ev.wait_varies:
        out.append(
            f"data waits vary irregularly and make the step time vary {ev.step_cv:.0%} "
            f"(target < {STEP_CV_MAX:.0%}): prefetch deeper so single slow batches are "
            "absorbed, and look for what stalls now and then (a slow file, another process)"
        )
    return out or [_keeps_up(ev)]


def _same(a: float | None, b: float | None) -> bool:
    """Whether two durations are the same within a quarter."""
    return a is not None and b is not None and abs(a - b) <= 0.25 * max(a, b)


def _keeps_up(ev: Evidence) -> str:
    varies = (
        f"; the step-time variation of {ev.step_cv:.0%} comes from the step itself, not from "
        "data waits"
        if ev.unsteady
        else ""
    )
    return (
        f"the data pipeline keeps up (data wait {ev.share or 0.0:.0%} < {DATA_WAIT_MAX:.0%}"
        f"{varies}): the model step is the bottleneck; no data-loading change needed"
    )


def _data_bound(ev: Evidence, info: LoaderInfo) -> list[str]:
    if info.kind == DATALOADER:
        return _dataloader(ev, info)
    if info.kind in STORE_FAMILY:
        return store_family(ev, info)
    if info.kind == DALI:
        return dali(ev, info)
    if info.kind == TF_DATA:
        return tf_data(ev, info)
    busy = ev.wait_busy
    where = (
        ""
        if busy is None
        else f"; the training thread spends {busy:.0%} of the wait on the CPU, "
        + ("so the batches are made on it" if busy >= BUSY_CPU else "the rest waiting")
    )
    return [
        f"{_gain(ev)}{where}, and the settings of {info.name} cannot be read: load in parallel "
        "(DataLoader num_workers, StoreLoader prefetch), or " + STORE
    ]


def _worker_extras(ev: Evidence, info: LoaderInfo) -> str:
    extras = []
    if not info.get("persistent_workers") and ev.passes > 1:
        extras.append("persistent_workers=True")
    if ev.has_gpu and not info.get("pin_memory"):
        extras.append("pin_memory=True")
    return "".join(f", {e}" for e in extras)


def _dataloader(ev: Evidence, info: LoaderInfo) -> list[str]:
    n, cores = info.helpers, ev.cores
    if n == 0:
        return _in_thread_workers(ev, info)
    helpers = ev.helper_cores
    per = None if helpers is None else helpers / n
    used = (
        ""
        if helpers is None
        else (f"{n} worker(s) keep {helpers:.1f} of {cores} cores busy ({per:.0%} each)")
    )
    if n < cores:  # idle cores: more workers help whether the workers compute or wait
        waits = per is not None and per < BUSY_CPU
        why = used or f"{n} worker(s) run on {cores} cores"
        return [
            f"raise num_workers from {n} to {max(cores, 2 * n) if waits else cores}"
            f"{_worker_extras(ev, info)}: {_gain(ev)}; {why}, and {cores - n} more core(s) "
            "can load in parallel",
            "if that is not enough, " + STORE + " so epochs skip decoding",
        ]
    if helpers is None or per is None:
        return [
            f"{_gain(ev)} with {n} workers on {cores} cores, whose CPU was not measured "
            "(iterate past the warm-up steps to measure it)"
        ]
    if per < BUSY_CPU or helpers < FULL_CORES * min(n, cores):
        if (ev.other_cpu_percent or 0.0) > OTHERS_BUSY:
            return [
                f"{_gain(ev)} and {used}, while other processes use about "
                f"{ev.other_cpu_percent:.0f}% of the machine: the workers get less CPU than "
                "the cores suggest; measure on an idle machine before changing settings"
            ]
        pf = info.get("prefetch_factor") or 2
        return [
            f"raise num_workers from {n} to {max(cores, 2 * n)} and prefetch_factor from {pf} "
            f"to {2 * pf}{_worker_extras(ev, info)}: {_gain(ev)} and {used}: they wait on "
            "I/O, and more of them overlap the reads (more workers than cores is fine here)"
        ]
    out = [
        f"{STORE}: {_gain(ev)} and {used}: decoding fills the cores, so more workers cannot help"
    ]
    if ev.has_gpu:
        out.append("or decode on the GPU (gpu-decode: loaders.dali.JpegLoader)")
    return out


def _in_thread_workers(ev: Evidence, info: LoaderInfo) -> list[str]:
    cores, busy = ev.cores, ev.wait_busy
    extras = _worker_extras(ev, info)
    if busy is not None and busy < BUSY_CPU:
        return [
            f"raise num_workers from 0 to {2 * cores}{extras}: {_gain(ev)}; the training "
            f"thread loads each batch itself and is off the CPU for {1 - busy:.0%} of the "
            "wait (I/O latency): worker processes overlap the reads with each other and "
            "with the step"
        ]
    cpu = "" if busy is None else f" ({busy:.0%} of the wait is CPU work)"
    if cores < 2:
        return [
            f"{STORE}: {_gain(ev)}; the training thread decodes each batch itself{cpu} on "
            "the only core, so workers cannot add CPU"
        ]
    return [
        f"raise num_workers from 0 to {cores}{extras}: {_gain(ev)}; the training thread "
        f"decodes each batch itself{cpu} while {cores - 1} of {cores} cores have no loading "
        "work",
        "if that is not enough, " + STORE + " so epochs skip decoding",
    ]
