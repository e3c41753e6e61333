"""DALI loaders vs their torch counterparts, side by side in one run.

Run: ``.venv/bin/python -m benchmarks.suite.dali [--images 256] [--batch 32] [--runs 3]``

Pairs (each strategy from :mod:`benchmarks.harness.strategies`, so all do the same work: random
resized crop to ``--size``, horizontal flip, normalise, float32 NCHW on ``--device``):

* store: ``precompute-dali`` (``DaliStoreLoader``) vs ``precompute`` (``StoreLoader`` +
  ``TrainAugment``), both reading the same store;
* raw files: ``gpu-decode`` (``JpegLoader``: DALI decodes the JPEG/PNG files) vs ``workers``
  (classic torch DataLoader, ``--workers`` Pillow worker processes), both reading the same files.

Setup (not timed): a sample JPEG/PNG dataset (``precompute.sample``) and a store of the same
images centre-cropped to ``--store-size`` (``write_store_from_arrays``); each loader is built
and runs one warm-up epoch, then ``--runs`` epochs, one strategy after another
(:mod:`benchmarks.runner`; taking turns would let a DALI pipeline refill its prefetch queue
while the others run), reported as samples/s and host CPU ms per sample
(this process and its children: DALI threads, DataLoader workers). Without a GPU every figure
is a CPU figure: DALI runs its CPU operators (``device_id=None``) and "gpu-decode" decodes on
the CPU. Results are printed, not committed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import center_crop
from benchmarks.runner import Bench, Line, Row, add_json_argument, ratio

__all__ = ["main"]

PAIRS = (("precompute-dali", "precompute"), ("gpu-decode", "workers"))


def make_data(root: Path, n: int, store_size: int) -> tuple[Path, Path]:
    """Write the raw dataset and a store of the same images; return both paths."""
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.sample import make_sample_dataset
    from precompute.sources.classes import list_source
    from precompute.spec import BuildSpec

    data = make_sample_dataset(
        root / "raw", num_images=n, num_classes=8, size_range=(256, 400), seed=0
    )
    source = list_source(data)
    images = np.stack([center_crop(source.locate(k), store_size) for k, _ in source.items])
    labels = np.asarray([label for _, label in source.items])
    spec = BuildSpec(size=store_size, mode="center-crop", shard_samples=128, chunk_samples=32)
    write_store_from_arrays(root / "store", images, labels, spec)
    return data, root / "store"


def _epoch(source: Any, epoch: int) -> int:
    n = 0
    for images, labels in source.epoch(epoch):
        if images.device.type == "cuda":
            torch.cuda.synchronize()
        n += int(labels.shape[0])
    return n


def _row(name: str, source: Any) -> Row:
    return Row(name, lambda run: _epoch(source, run.index), clock="tree")


def pair_lines(names: list[str]) -> list[Line]:
    """Throughput and CPU per sample of each DALI loader over its torch counterpart."""
    lines = []
    for dali, other in PAIRS:
        if dali in names and other in names:
            lines.append(ratio(f"{dali} / {other}: throughput", dali, other, fmt="x{:.2f}"))
            label = f"{dali} / {other}: CPU per sample"
            lines.append(ratio(label, dali, other, figure="cpu_ms", fmt="x{:.2f}"))
    return lines


def _env(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.environment import environment

    env = environment()
    env["args"] = vars(args)
    env["note"] = (
        "CPU figures: no GPU, DALI runs CPU operators"
        if not torch.cuda.is_available()
        else "GPU present: DALI runs GPU operators / mixed decode"
    )
    return env


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, build the data, measure every strategy and print the comparison."""
    from benchmarks.harness.strategies import RunConfig, get_strategy

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=128, help="output crop side")
    ap.add_argument("--store-size", type=int, default=160)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers / DALI threads")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    bench = Bench("dali", args.json)
    bench.note(json.dumps(_env(args), indent=1, default=str))
    with bench, tempfile.TemporaryDirectory(prefix="bench_dali_") as tmp:
        data, store = make_data(Path(tmp), args.images, args.store_size)
        cfg = RunConfig(
            data=str(data),
            store=str(store),
            batch_size=args.batch,
            workers=args.workers,
            size=args.size,
            seed=0,
            device=args.device,
        )
        sources = {}
        try:
            for name in (n for pair in PAIRS for n in pair):
                strategy = get_strategy(name)
                reason = strategy.unavailable(cfg)
                if reason:
                    bench.note(f"{name}: unavailable: {reason}")
                else:
                    sources[name] = strategy.open(cfg)
            rows = [_row(name, source) for name, source in sources.items()]
            lines = pair_lines(list(sources))
            # one strategy after another: a DALI pipeline refills its prefetch queue as soon as
            # an epoch ends, so taking turns would hand it a head start on every epoch
            bench.measure("strategies", rows, runs=args.runs, lines=lines, interleave=False)
        finally:
            for source in sources.values():
                source.close()


if __name__ == "__main__":
    main()
