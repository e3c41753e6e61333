"""Data-wait spikes that recur every N steps: what in the loader has that period, and the fix.

A period is explained only by something the loader has with that period, or said to match
none: workers finishing in lockstep (``N`` a multiple of ``num_workers``), a StoreLoader's
shuffle window, one of its chunks, a new shard file (only in a store of several shards), the
start of each pass over the loader (``N`` the steps of one pass: a new iterator, workers
started again, the first window read). The spikes at each pass's start of a ``tf.data``
dataset iterated once per epoch are the new iterators the iterator advice already names: no
second explanation is given. Spikes are worth a word only while the step-time target is missed.

Pure functions of :class:`~loaders.diagnostics.evidence.Evidence` and
:class:`~loaders.diagnostics.loader_info.LoaderInfo`.
"""

from __future__ import annotations

import math

from loaders.diagnostics.analysis import STEP_CV_MAX
from loaders.diagnostics.evidence import Evidence
from loaders.diagnostics.loader_info import (
    DALI,
    DATALOADER,
    STORE_FAMILY,
    TF_DATA,
    TF_STORE,
    LoaderInfo,
)

__all__ = ["explain_stalls", "is_pass_period", "ordinal", "stall_advice"]


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``, ..."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def is_pass_period(period: float | None, pass_steps: float | None) -> bool:
    """Whether a spike period is the length of one pass over the loader (an epoch)."""
    if not period or not pass_steps:
        return False
    return abs(period - pass_steps) <= max(0.5, 0.05 * pass_steps)


def _near(period: int, batches: float) -> bool:
    return batches >= 2 and abs(batches - period) <= max(0.5, 0.1 * batches)


def _pass_start(p: int, info: LoaderInfo) -> str:
    head = f"the spikes come once a pass ({p} steps, the length of one pass over the loader)"
    if info.kind == DATALOADER and info.helpers and not info.get("persistent_workers"):
        return f"{head}: each pass starts the {info.helpers} worker processes again"
    if info.kind == DATALOADER:
        return f"{head}: each pass's first batches wait for the workers' queue to fill again"
    if info.kind == TF_DATA or (info.kind == TF_STORE and not info.get("epochs")):
        return f"{head}: each pass starts a new tf.data iterator"
    if info.kind in STORE_FAMILY:
        return f"{head}: each epoch's first batch waits for its first shuffle window to be read"
    return f"{head}: each pass's first batch waits while {info.name} starts over"


def _store(p: int, info: LoaderInfo) -> str:
    bs = info.get("batch_size") or 1
    chunk = (info.get("chunk_samples") or 1) / bs
    window = (info.get("buffer_chunks") or 1) * chunk
    shard = (info.get("shard_samples") or 0) / bs
    if _near(p, window):
        return (
            f"StoreLoader reads a shuffle window of {info.get('buffer_chunks')} chunks "
            f"({window:.0f} batches) at a time"
        )
    if (info.get("shards") or 1) > 1 and _near(p, shard):
        return (
            f"StoreLoader moves to another of the store's {info.get('shards')} shard files "
            f"every {shard:.0f} batches (a slow shard file, or one the page cache lacks?)"
        )
    if _near(p, chunk):
        return f"StoreLoader reads one chunk every {chunk:.0f} batches, and the reads stall"
    periods = f"a chunk: {chunk:g} batches, a shuffle window: {window:g}"
    periods += f", a shard file: {shard:g}" if (info.get("shards") or 1) > 1 else ""
    return (
        f"the period matches none of StoreLoader's reads ({periods}): what stalls every {p} "
        "batches is outside them (the step, logging, a checkpoint, another process)"
    )


def explain_stalls(period: float, info: LoaderInfo, pass_steps: float | None = None) -> str:
    """Say what can stall every ``period`` steps, given what the loader has.

    Args:
        period: Steps between data-wait spikes.
        info: The loader.
        pass_steps: Steps of one pass over the loader (None: one pass, or unknown).
    """
    p = round(period)
    n = info.helpers
    if is_pass_period(period, pass_steps):
        return _pass_start(p, info)
    if info.kind == DATALOADER and n > 1 and p % n == 0:
        return (
            f"with num_workers={n} each worker delivers every {ordinal(n)} batch, so the "
            "workers finish their batches together"
        )
    if info.kind == DATALOADER:
        where = "on the training thread" if n == 0 else f"in one of the {n} workers"
        return (
            f"the dataset stalls {where} every {p} batches (a file or shard boundary, a "
            "cache refill, logging)"
        )
    if info.kind in STORE_FAMILY:
        return _store(p, info)
    if info.kind == DALI:
        return f"the DALI pipeline's feed stalls every {p} batches"
    return f"{info.name} stalls every {p} batches (a file boundary, logging, a checkpoint)"


def stall_advice(ev: Evidence, info: LoaderInfo, *, advised_restarts: bool = False) -> str | None:
    """The advice on recurring stalls that make the step time vary, or None.

    Args:
        ev: The evidence.
        info: The loader.
        advised_restarts: The new iterator of each pass is advised on already (its spikes
            then get no second explanation).
    """
    if not (ev.unsteady and ev.wait_period_steps and ev.stall_s and ev.median_step_s):
        return None
    once_a_pass = is_pass_period(ev.wait_period_steps, ev.pass_steps)
    if once_a_pass and advised_restarts:
        return None
    head = (
        f"data-wait stalls of about {ev.stall_s * 1e3:.0f} ms recur every "
        f"{ev.wait_period_steps:.0f} steps and make the step time vary {ev.step_cv:.0%} "
        f"(target < {STEP_CV_MAX:.0%}): {explain_stalls(ev.wait_period_steps, info, ev.pass_steps)}"
    )
    if once_a_pass:
        return f"{head}; {_once_a_pass(info)}"
    need = math.ceil(ev.stall_s / ev.median_step_s) + 1  # batches queued to cover one stall
    return f"{head}; {_absorb(need, info)}"


def _once_a_pass(info: LoaderInfo) -> str:
    if info.kind == DATALOADER and info.helpers and not info.get("persistent_workers"):
        return "set persistent_workers=True so that the workers outlive each pass"
    return (
        "a prefetch queue starts empty each pass, so no depth absorbs it: one stall a pass, "
        "which longer passes make rarer"
    )


def _absorb(need: int, info: LoaderInfo) -> str:
    ahead = f"{need} batches ahead absorbs each stall"
    if info.kind == DATALOADER and info.helpers == 0:
        return (
            "loading on the training thread cannot hide it: set num_workers >= 1 with "
            f"num_workers x prefetch_factor >= {need}: {ahead}"
        )
    if info.kind == DATALOADER:
        n, pf = info.helpers, info.get("prefetch_factor") or 2
        want = math.ceil(need / n)
        if want > pf:
            return (
                f"raise prefetch_factor from {pf} to {want}: {n} x {want} = {n * want} >= {ahead}"
            )
        return f"the queue ({n} x {pf} batches) is deep enough: remove what stalls"
    if info.kind in (*STORE_FAMILY, DALI):
        prefetch = info.get("prefetch") or 0
        if need > prefetch:
            return f"raise prefetch from {prefetch} to {need}: {ahead}"
        return f"prefetch={prefetch} is deep enough: remove what stalls"
    return f"prefetching {ahead}, or remove what stalls"
