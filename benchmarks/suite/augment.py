"""Training-ready batches per second on the CPU: nostall's augment paths vs a classic DataLoader.

Run: ``.venv/bin/python -m benchmarks.suite.augment [--images 512] [--batch 64] [--runs 5]``

Setup (not timed): a sample JPEG/PNG dataset (``precompute.sample.make_sample_dataset``) and a
store of the same images centre-cropped to ``--store-size`` px (``write_store_from_arrays``).
Timed by :mod:`benchmarks.runner`, side by side in one run, ``--runs`` epochs after a warm-up
epoch; the rows take turns epoch by epoch, so the host's load hits them alike:

* ``classic``: torch DataLoader, 2 worker processes, Pillow decode + random resized crop +
  flip + normalise (``benchmarks.harness.strategies.workers.PillowTrainDataset``).
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

from benchmarks.common import aten_op_counts, center_crop
from benchmarks.runner import Bench, Line, Results, Row, Run, add_json_argument, ratio

__all__ = ["main"]

SEED = 0
CLASSIC = "classic DataLoader (2 Pillow workers)"
Augment = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
FORMATS = ["float32 channels_last", "bfloat16", "bfloat16 channels_last"]


def make_data(root: Path, n: int, store_size: int) -> tuple[list[Path], list[int], Path]:
    """Write the JPEG/PNG dataset and its store; return paths, labels and the store path."""
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.sample import make_sample_dataset
    from precompute.spec import BuildSpec

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


def classic_epochs(
    paths: list[Path], labels: list[int], size: int, batch: int
) -> tuple[Callable[[int], Iterable[int]], Callable[[], None]]:
    """The DataLoader + 2 Pillow workers baseline; returns (epoch fn, close fn)."""
    from torch.utils.data import DataLoader

    from benchmarks.harness.strategies.workers import EpochSampler, PillowTrainDataset

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


def _cpu_over(num: str, den: str) -> Callable[[Results], float]:
    """Median CPU ms/sample of row ``num`` over that of row ``den``."""
    return lambda r: r[num].median("cpu_ms") / r[den].median("cpu_ms")


def ratio_lines(names: list[str], formats: list[str], threads: int) -> list[Line]:
    """Each row vs the classic loader; each output format vs float32 planar; bf16 vs float32."""
    lines = [ratio(f"{name} / classic (samples/s)", name, CLASSIC) for name in names]
    ref = f"StoreLoader + augment fast, {threads} threads"
    for fmt in formats:
        label = f"{fmt} / float32 planar, {ref} (samples/s)"
        lines.append(ratio(label, f"{ref}, {fmt}", ref))
    for layout in ("", " channels_last"):
        f32 = ref + (", float32 channels_last" if layout else "")
        bf16 = f"{ref}, bfloat16{layout}"
        same = f"bfloat16{layout} vs float32 of the same memory format"
        lines.append(ratio(f"{same} (samples/s)", bf16, f32))
        lines.append(
            Line(f"{same} (CPU: float32's CPU ms/sample over bfloat16's)", _cpu_over(f32, bf16))
        )
    return lines


def _args(argv: list[str] | None) -> argparse.Namespace:
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
    add_json_argument(p)
    return p.parse_args(argv)


def _policies(a: argparse.Namespace) -> dict[str, Augment]:
    """The augment policies by role: fast (1 and N threads), grid, jitter, output formats."""
    from loaders.augment import ColorJitter, TrainAugment

    policies: dict[str, Augment] = {
        "fast": TrainAugment(size=a.size, path="fast", threads=1),
        "grid": TrainAugment(size=a.size, path="grid"),
        "fast_t": TrainAugment(size=a.size, path="fast", threads=a.threads),
        "fast_j": TrainAugment(size=a.size, path="fast", jitter=ColorJitter(0.4, 0.4, 0.4)),
    }
    for dtype, cl in (("float32", True), ("bfloat16", False), ("bfloat16", True)):
        policies[f"{dtype}{' channels_last' if cl else ''}"] = TrainAugment(
            size=a.size, path="fast", threads=a.threads, dtype=dtype, channels_last=cl
        )
    return policies


def _rows(
    a: argparse.Namespace, store: Path, batch: torch.Tensor, extents: torch.Tensor
) -> dict[str, Callable[[int], Iterable[int]]]:
    """The StoreLoader and augment-alone epochs by row name (the classic row apart)."""
    aug = _policies(a)
    reps = max(1, a.images // a.batch)
    fast = f"StoreLoader + augment fast, {a.threads} threads"
    rows = {
        "StoreLoader + augment fast, 1 thread": store_epochs(store, a.batch, aug["fast"]),
        fast: store_epochs(store, a.batch, aug["fast_t"]),
    }
    for name in FORMATS:
        rows[f"{fast}, {name}"] = store_epochs(store, a.batch, aug[name])
    if not a.no_grid:
        rows["StoreLoader + augment grid"] = store_epochs(store, a.batch, aug["grid"])
    rows["augment fast alone, 1 thread"] = augment_only(aug["fast"], batch, extents, reps)
    rows[f"augment fast alone, {a.threads} threads"] = augment_only(
        aug["fast_t"], batch, extents, reps
    )
    rows["augment grid alone (batch in memory)"] = augment_only(aug["grid"], batch, extents, reps)
    rows["augment fast + colour jitter alone"] = augment_only(aug["fast_j"], batch, extents, reps)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print the table and ratios."""
    from benchmarks.environment import environment
    from loaders.augment import TrainAugment

    a = _args(argv)
    env = environment()
    with Bench("augment", a.json) as bench, tempfile.TemporaryDirectory() as tmp:
        bench.note(
            json.dumps({k: env[k] for k in ("cpu", "cores_usable", "memory_gib")})
            + f" torch {torch.__version__}, intra-op threads {torch.get_num_threads()}"
        )
        t0 = time.perf_counter()
        paths, labels, store = make_data(Path(tmp), a.images, a.store_size)
        bench.note(
            f"setup: {a.images} images (300-500 px JPEG/PNG) + store of {a.store_size}px "
            f"in {time.perf_counter() - t0:.1f}s; batch {a.batch}, output {a.size}px"
        )
        batch = torch.from_numpy(np.stack([center_crop(p, a.store_size) for p in paths[: a.batch]]))
        extents = torch.tensor([[0, 0, a.store_size, a.store_size]] * a.batch, dtype=torch.int32)
        classic, close = classic_epochs(paths, labels, a.size, a.batch)
        epochs = {CLASSIC: classic, **_rows(a, store, batch, extents)}
        rows = [
            Row(name, _counted(epoch), clock="tree" if name == CLASSIC else "process")
            for name, epoch in epochs.items()
        ]
        lines = ratio_lines(list(epochs), FORMATS, a.threads)
        try:
            bench.measure("training-ready batches on the CPU", rows, runs=a.runs, lines=lines)
        finally:
            close()
        grid = TrainAugment(size=a.size, path="grid")
        counts = {b: op_count(grid, b, a.store_size) for b in (32, 256)}
        bench.note(
            f"profiler aten ops per batch, grid (device) path: batch 32 -> {counts[32]}, "
            f"batch 256 -> {counts[256]}",
            "  (the CPU fast path runs one small resize per sample on worker threads by design; "
            "its op count grows with the batch and is not shown)",
        )


def _counted(epoch: Callable[[int], Iterable[int]]) -> Callable[[Run], int]:
    return lambda run: sum(epoch(run.index))


if __name__ == "__main__":
    main()
