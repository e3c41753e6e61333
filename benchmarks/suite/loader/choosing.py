"""``benchmarks.suite.loader`` section 6: choosing samples, timed against the plain loader.

Rows, interleaved on the same store (a mixture: two stores of half its samples each):
StoreLoader plain, with a subset (80% of the samples, by a predicate over the label), with
weighted sampling (one class drawn ten times as often, with replacement), and with a mixture
in proportions per batch; samples/s and host CPU per sample over ``EPOCHS`` epochs a run,
each over the plain loader's (target >= 0.9). Then, untimed, what reading whole chunks
approximates (the plans alone): the chunk rows read per sample served with a subset, and how
weighted draws served chunk window by chunk window compare with the same draws served in a
uniformly random order.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.image_data import random_store
from benchmarks.runner import Line, Row, ratio
from loaders import StoreLoader

__all__ = ["CHOOSING_LINES", "approximation_notes", "choosing_rows"]

PLAIN = "StoreLoader plain (same store)"
SUBSET = "StoreLoader subset= (80%, label predicate)"
WEIGHTED = "StoreLoader weights= (1 class x10, replacement)"
MIXTURE = "StoreLoader mixture of 2 stores (0.5/0.5 per batch)"
CHOSEN = (SUBSET, WEIGHTED, MIXTURE)


EPOCHS = 4  # epochs a timed run drains: one epoch of 2048 samples is a few tens of ms


def _drain(loader: StoreLoader) -> int:
    return sum(len(b["index"]) for _ in range(EPOCHS) for b in loader)


def _row(name: str, loader: StoreLoader) -> Row:
    return Row(name, lambda run: _drain(loader), "process")


def choosing_rows(root: Path, args: argparse.Namespace) -> list[Row]:
    """The section's interleaved rows (setup here, outside the timed bodies)."""
    store, _ = random_store(root / "choose", args.samples, args.size, npy=False)
    halves = [
        random_store(root / f"half{k}", args.samples // 2, args.size, npy=False)[0] for k in (0, 1)
    ]
    kw = {"device": "cpu", "num_threads": args.threads}
    labels = np.arange(args.samples) % 10  # random_store's labels
    weights = np.where(labels == 0, 10.0, 1.0)
    loaders = {
        PLAIN: StoreLoader(store, args.batch, **kw),
        SUBSET: StoreLoader(store, args.batch, subset=lambda s: s["label"] < 8, **kw),
        WEIGHTED: StoreLoader(store, args.batch, weights=weights, **kw),
        MIXTURE: StoreLoader(halves, args.batch, proportions=[0.5, 0.5], **kw),
    }
    return [_row(name, loader) for name, loader in loaders.items()]


CHOOSING_LINES: tuple[Line, ...] = tuple(
    line
    for name in CHOSEN
    for line in (
        ratio(f"-> {name} / plain samples/s:", name, PLAIN, fmt="{:.2f}", note="(target >= 0.9)"),
        ratio(
            f"-> plain / {name} CPU ms/sample:",
            PLAIN,
            name,
            figure="cpu_ms",
            fmt="{:.2f}",
            note="(target >= 0.9)",
        ),
    )
)


def _read_per_served(loader: StoreLoader) -> float:
    """Chunk rows read per sample served: the windows' chunks over the epoch's positions."""
    plan = loader.plan(0)
    rows = sum(len(w.chunks) for w in plan.windows) * plan.chunk_samples
    return rows / max(len(plan.order), 1)


def _batch_stats(order: np.ndarray, rare: np.ndarray, batch: int) -> tuple[float, float, float]:
    """Per-batch rare share (std), repeated draws per batch (mean), mean gap between repeats."""
    n = len(order) // batch * batch
    batches = order[:n].reshape(-1, batch)
    share = rare[batches].mean(1)
    twice = np.mean([batch - len(np.unique(b)) for b in batches])
    first: dict[int, int] = {}
    gaps = []
    for pos, i in enumerate(order[:n].tolist()):
        if i in first:
            gaps.append(pos - first[i])
        first[i] = pos
    return float(share.std()), float(twice), float(np.mean(gaps)) if gaps else 0.0


def approximation_notes(root: Path, args: argparse.Namespace, note: Callable[..., None]) -> None:
    """Print what whole-chunk reads approximate, from the plans (nothing is read)."""
    n = args.samples
    rare = np.random.default_rng(0).permutation(n) < n // 20  # 5% of class 1, spread out
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.spec import BuildSpec

    store = root / "rare"
    spec = BuildSpec(size=4, chunk_samples=32, shard_samples=256)
    write_store_from_arrays(store, np.zeros((n, 4, 4, 3), np.uint8), rare.astype(np.int64), spec)
    note(f"\n[6] what reading whole chunks approximates ({n} samples, chunks of 32, plans only)")
    for share in (0.8, 0.1):
        sub = StoreLoader(store, 8, subset=np.random.default_rng(1).random(n) < share)
        note(f"  subset of {share:.0%}: {_read_per_served(sub):.2f} chunk rows read per sample")
    for window in (8, 32):
        loader = StoreLoader(store, args.batch, balance="label", buffer_chunks=window)
        order = loader.plan(0).order
        iid = np.random.default_rng(2).permutation(order)
        got, want = _batch_stats(order, rare, args.batch), _batch_stats(iid, rare, args.batch)
        note(
            f"  balance='label' (5% rare), buffer_chunks={window}: rare share per "
            f"batch std {got[0]:.3f} (random order {want[0]:.3f}); draws repeating one in their "
            f"batch {got[1]:.1f} ({want[1]:.1f}); positions between a sample's repeats "
            f"{got[2]:.0f} ({want[2]:.0f})"
        )
