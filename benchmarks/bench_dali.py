"""DALI loaders vs their torch counterparts, side by side in one run.

Run: ``.venv/bin/python -m benchmarks.bench_dali [--images 256] [--batch 32] [--runs 3]``

Pairs (each strategy from :mod:`benchmarks.harness.strategies`, so all do the same work: random resized
crop to ``--size``, horizontal flip, normalise, float32 NCHW on ``--device``):

* store: ``precompute-dali`` (``DaliStoreLoader``) vs ``precompute`` (``StoreLoader`` +
  ``TrainAugment``), both reading the same store;
* raw files: ``gpu-decode`` (``JpegLoader``: DALI decodes the JPEG/PNG files) vs ``workers``
  (classic torch DataLoader, ``--workers`` Pillow worker processes), both reading the same files.

Setup (not timed): a sample JPEG/PNG dataset (``precompute.sample``) and a store of the same
images centre-cropped to ``--store-size`` (``write_store_from_arrays``); each loader is built
and runs one warm-up epoch. Then ``--runs`` epochs per strategy, in turn; the median is reported
as samples/s and host CPU seconds per sample (this process and its children: DALI threads,
DataLoader workers). Without a GPU every figure is a CPU figure: DALI runs its CPU operators
(``device_id=None``) and "gpu-decode" decodes on the CPU. Results are printed, not committed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import center_crop, interleaved

__all__ = ["main"]

PAIRS = (("precompute-dali", "precompute"), ("gpu-decode", "workers"))


def make_data(root: Path, n: int, store_size: int) -> tuple[Path, Path]:
    """Write the raw dataset and a store of the same images; return both paths."""
    from precompute.sample import make_sample_dataset
    from precompute.sources import list_source
    from precompute.spec import BuildSpec
    from precompute.writer import write_store_from_arrays

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


def measure(name: str, cfg: Any, runs: int) -> dict[str, Any]:
    """Open strategy ``name``, run a warm-up epoch, then time ``runs`` epochs."""
    from benchmarks.harness.strategies import get_strategy

    strategy = get_strategy(name)
    reason = strategy.unavailable(cfg)
    if reason:
        return {"name": name, "status": f"unavailable: {reason}"}
    source = strategy.open(cfg)
    try:  # epoch 0 warms up: worker start, page cache, pipeline build
        rate, cpu = interleaved({name: lambda e: _epoch(source, e)}, runs)[name]
    finally:
        source.close()
    return {
        "name": name,
        "status": "ok",
        "samples_per_s": rate,
        "cpu_s_per_sample": cpu,
        "runs": runs,
    }


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


def _report(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'strategy':<18}{'samples/s':>12}{'CPU ms/sample':>16}")
    for r in results.values():
        if r["status"] != "ok":
            print(f"{r['name']:<18}{r['status']}")
            continue
        print(f"{r['name']:<18}{r['samples_per_s']:>12.1f}{r['cpu_s_per_sample'] * 1e3:>16.2f}")
    print()
    for dali, other in PAIRS:
        a, b = results[dali], results[other]
        if a["status"] == b["status"] == "ok":
            print(
                f"{dali} / {other}: throughput x{a['samples_per_s'] / b['samples_per_s']:.2f}, "
                f"CPU per sample x{a['cpu_s_per_sample'] / b['cpu_s_per_sample']:.2f}"
            )


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, build the data, measure every strategy and print the comparison."""
    from benchmarks.harness.strategies import RunConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=128, help="output crop side")
    ap.add_argument("--store-size", type=int, default=160)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers / DALI threads")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    print(json.dumps(_env(args), indent=1, default=str))
    with tempfile.TemporaryDirectory(prefix="bench_dali_") as tmp:
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
        results = {n: measure(n, cfg, args.runs) for pair in PAIRS for n in pair}
    _report(results)


if __name__ == "__main__":
    main()
