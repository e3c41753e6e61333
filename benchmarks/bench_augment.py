"""Training-ready batches per second on the CPU: nostall's augment paths vs a classic DataLoader.

Run: ``.venv/bin/python -m benchmarks.bench_augment [--images 512] [--batch 64] [--runs 5]``

Setup (not timed): a sample JPEG/PNG dataset (``precompute.sample.make_sample_dataset``) and a
store of the same images centre-cropped to ``--store-size`` px (``write_store_from_arrays``).
Timed, side by side in one run, each a median over ``--runs`` epochs after a warm-up epoch;
the rows take turns epoch by epoch, so the host's load hits them alike:

* ``classic``: torch DataLoader, 2 worker processes, Pillow decode + random resized crop +
  flip + normalise (``benchmarks.harness.strategy_workers.PillowTrainDataset``).
* ``store+fast`` / ``store+grid``: ``loaders.StoreLoader`` reading the store, with
  ``TrainAugment`` (crop + flip + normalise) on the CPU fast path / the batched grid path;
  the fast path also into float32 channels-last and bfloat16 (planar and channels-last).
* ``augment fast`` / ``augment grid``: the augment call alone on a batch already in memory
  (and the fast path with colour jitter on top, for its cost).

Then the torch-profiler aten op count of one grid-path augment call at batch 32 and 256.
Prints samples/s, CPU ms per sample (the classic row: this process and its workers; the others:
this process's nanosecond clock) and ratios; bfloat16 against float32 of the same memory format
also by CPU per sample, which a busy host disturbs less than samples/s. Results are not
committed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import Row, aten_op_counts, center_crop, interleaved

__all__ = ["main"]

SEED = 0
CLASSIC = "classic DataLoader (2 Pillow workers)"
Augment = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


def make_data(root: Path, n: int, store_size: int) -> tuple[list[Path], list[int], Path]:
    """Write the JPEG/PNG dataset and its store; return paths, labels and the store path."""
    from precompute.sample import make_sample_dataset
    from precompute.spec import BuildSpec
    from precompute.writer import write_store_from_arrays

    data = make_sample_dataset(
        root / "jpeg", num_images=n, num_classes=8, size_range=(300, 500), seed=SEED
    )
    classes = sorted(p.name for p in data.iterdir() if p.is_dir())
    items = sorted((p, classes.index(p.parent.name)) for c in classes for p in (data / c).iterdir())
    paths, labels = [p for p, _ in items], [label for _, label in items]
    images = np.stack([center_crop(p, store_size) for p in paths])
    spec = BuildSpec(size=store_size, mode="center-crop", shard_samples=256, chunk_samples=32)
    write_store_from_arrays(root / "store", images, np.asarray(labels), spec)
    return paths, labels, root / "store"


def time_epochs(
    epochs: dict[str, Callable[[int], Iterable[int]]], runs: int
) -> dict[str, tuple[float, float]]:
    """Return median samples/s and CPU ms/sample of each row over ``runs`` epochs.

    The rows take turns after a warm-up epoch each (:func:`benchmarks.common.interleaved`);
    an epoch yields the sizes of its batches. Rows that run in this process alone (all but
    the classic loader's worker processes) read this process's CPU clock, which counts
    nanoseconds where the process-tree clock counts scheduler ticks.
    """
    rows: dict[str, Row] = {name: _counted(epoch) for name, epoch in epochs.items()}
    clocks = {name: time.process_time for name in epochs if name != CLASSIC}
    timed = interleaved(rows, runs, clocks)
    return {name: (rate, 1e3 * cpu) for name, (rate, cpu) in timed.items()}


def _counted(epoch: Callable[[int], Iterable[int]]) -> Row:
    return lambda e: sum(epoch(e))


def classic_epochs(
    paths: list[Path], labels: list[int], size: int, batch: int
) -> tuple[Callable[[int], Iterable[int]], Callable[[], None]]:
    """The DataLoader + 2 Pillow workers baseline; returns (epoch fn, close fn)."""
    from torch.utils.data import DataLoader

    from benchmarks.harness.strategy_workers import EpochSampler, PillowTrainDataset

    sampler = EpochSampler(len(paths), SEED)
    loader = DataLoader(
        PillowTrainDataset(paths, labels, size, SEED),
        batch_size=batch,
        sampler=sampler,
        num_workers=2,
        persistent_workers=True,
        prefetch_factor=2,
        drop_last=True,
    )

    def epoch(e: int) -> Iterable[int]:
        sampler.epoch = e
        return (len(images) for images, _ in loader)

    def close() -> None:
        it = getattr(loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()

    return epoch, close


def store_epochs(store: Path, batch: int, augment: Augment) -> Callable[[int], Iterable[int]]:
    """StoreLoader epochs with ``augment`` on the CPU."""
    from loaders import StoreLoader

    loader = StoreLoader(store, batch, device="cpu", seed=SEED, augment=augment)

    def epoch(e: int) -> Iterable[int]:
        loader.set_epoch(e)
        return (len(b["image"]) for b in loader)

    return epoch


def augment_only(
    aug: Augment, images: torch.Tensor, extents: torch.Tensor, reps: int
) -> Callable[[int], Iterable[int]]:
    """``reps`` augment calls on one in-memory batch per 'epoch'."""

    def epoch(e: int) -> Iterable[int]:
        g = torch.Generator().manual_seed(e)
        return (len(aug(images, extents, g)) for _ in range(reps))

    return epoch


def op_count(aug: Augment, batch: int, store_size: int) -> int:
    """Aten ops (torch profiler, CPU) of one augment call at ``batch``."""
    images = torch.randint(0, 256, (batch, store_size, store_size, 3), dtype=torch.uint8)
    extents = torch.tensor([[0, 0, store_size, store_size]] * batch, dtype=torch.int32)
    aug(images, extents, torch.Generator().manual_seed(0))
    counts = aten_op_counts(lambda: aug(images, extents, torch.Generator().manual_seed(0)))
    return sum(counts.values())


def same_format(results: dict[str, tuple[float, float]], threads: int) -> None:
    """Print bfloat16 against float32 of the same memory format: samples/s and CPU/sample."""
    row = f"StoreLoader + augment fast, {threads} threads"
    print(
        "bfloat16 vs float32 of the same memory format "
        "(samples/s; CPU: float32's CPU ms/sample over bfloat16's):"
    )
    for layout in ("", " channels_last"):
        f32 = results[row + (", float32 channels_last" if layout else "")]
        bf16 = results[f"{row}, bfloat16{layout}"]
        ratio, cpu = bf16[0] / f32[0], f32[1] / bf16[1]
        print(f"  {'bfloat16' + layout:60s} {ratio:6.2f}x   CPU {cpu:6.2f}x")


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=320)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224, help="output side")
    p.add_argument("--store-size", type=int, default=256)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="threads of the fast path variant")
    p.add_argument(
        "--no-grid",
        action="store_true",
        help="leave out the (slow on a CPU) StoreLoader + grid path row",
    )
    return p.parse_args()


def main() -> None:
    """Run the comparison and print the table and ratios."""
    from benchmarks.environment import environment
    from loaders.augment import ColorJitter, TrainAugment

    a = _args()
    env = environment()
    print(
        json.dumps({k: env[k] for k in ("cpu", "cores_usable", "memory_gib")}),
        f"torch {torch.__version__}, intra-op threads {torch.get_num_threads()}",
    )
    fast = TrainAugment(size=a.size, path="fast", threads=1)
    grid = TrainAugment(size=a.size, path="grid")
    fast_t = TrainAugment(size=a.size, path="fast", threads=a.threads)
    fast_j = TrainAugment(size=a.size, path="fast", jitter=ColorJitter(0.4, 0.4, 0.4))
    formats = {
        f"{dtype}{' channels_last' if cl else ''}": TrainAugment(
            size=a.size, path="fast", threads=a.threads, dtype=dtype, channels_last=cl
        )
        for dtype, cl in (("float32", True), ("bfloat16", False), ("bfloat16", True))
    }
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        paths, labels, store = make_data(Path(tmp), a.images, a.store_size)
        print(
            f"setup: {a.images} images (300-500 px JPEG/PNG) + store of {a.store_size}px "
            f"in {time.perf_counter() - t0:.1f}s; batch {a.batch}, output {a.size}px, "
            f"median of {a.runs} interleaved epochs after 1 warm-up each"
        )
        batch = torch.from_numpy(np.stack([center_crop(p, a.store_size) for p in paths[: a.batch]]))
        extents = torch.tensor([[0, 0, a.store_size, a.store_size]] * a.batch, dtype=torch.int32)
        reps = max(1, a.images // a.batch)
        classic, close = classic_epochs(paths, labels, a.size, a.batch)
        rows = {CLASSIC: classic}
        rows.update(
            {
                "StoreLoader + augment fast, 1 thread": store_epochs(store, a.batch, fast),
                f"StoreLoader + augment fast, {a.threads} threads": store_epochs(
                    store, a.batch, fast_t
                ),
            }
        )
        rows.update(
            {
                f"StoreLoader + augment fast, {a.threads} threads, {name}": store_epochs(
                    store, a.batch, aug
                )
                for name, aug in formats.items()
            }
        )
        if not a.no_grid:
            rows["StoreLoader + augment grid"] = store_epochs(store, a.batch, grid)
        rows.update(
            {
                "augment fast alone, 1 thread": augment_only(fast, batch, extents, reps),
                f"augment fast alone, {a.threads} threads": augment_only(
                    fast_t, batch, extents, reps
                ),
                "augment grid alone (batch in memory)": augment_only(grid, batch, extents, reps),
                "augment fast + colour jitter alone": augment_only(fast_j, batch, extents, reps),
            }
        )
        try:
            results = time_epochs(rows, a.runs)
        finally:
            close()
    for name, (rate, cpu) in results.items():
        print(f"{name:62s} {rate:9.0f} samples/s  {cpu:7.3f} CPU ms/sample")
    base = results[CLASSIC][0]
    print("ratios vs classic DataLoader (samples/s):")
    for name, (rate, _) in results.items():
        print(f"  {name:60s} {rate / base:6.2f}x")
    ref = results[f"StoreLoader + augment fast, {a.threads} threads"][0]
    print(f"ratios vs StoreLoader + augment fast, {a.threads} threads, float32 planar:")
    for name in formats:
        rate = results[f"StoreLoader + augment fast, {a.threads} threads, {name}"][0]
        print(f"  {name:60s} {rate / ref:6.2f}x")
    same_format(results, a.threads)
    counts = {b: op_count(grid, b, a.store_size) for b in (32, 256)}
    print(
        f"profiler aten ops per batch, grid (device) path: batch 32 -> {counts[32]}, "
        f"batch 256 -> {counts[256]}"
    )
    print(
        "  (the CPU fast path runs one small resize per sample on worker threads by design; "
        "its op count grows with the batch and is not shown)"
    )


if __name__ == "__main__":
    main()
