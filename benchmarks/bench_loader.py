"""Benchmark StoreLoader's host side against a numpy memmap and a classic DataLoader.

Run: ``.venv/bin/python -m benchmarks.bench_loader`` (``--help`` for sizes). Rows:

1. Loader alone (no augmentation, shuffled as it shuffles) from the page cache vs a numpy
   memmap gathering the same samples in the same order (one copy per sample; target >= 0.7),
   vs a numpy memmap copying contiguous batches of the same bytes in file order (one
   sequential copy per batch, the best a host can do; target >= 0.8), and vs zarr-python
   reading the same whole chunks: samples/s, CPU ms/sample, ratios. The loader runs with its
   defaults (``io="auto"``: mapped when the store fits in ``map_bytes``), with ``io="pread"``,
   with ``io="mmap"`` and a map budget covering the store (its mappings kept across epochs),
   and inline (no threads).
2. Host CPU seconds per sample: loader without augmentation vs a classic DataLoader (2 workers)
   decoding JPEGs with Pillow + random resized crop + flip + normalise (target <= 1/50).
3. Training-ready batches on the CPU: loader + ``loaders.augment.TrainAugment`` vs the classic
   DataLoader, samples/s (target >= 4x).
4. Peak RSS of a loader process for two store sizes and two prefetch settings.
5. Shuffle quality: mean class entropy per batch on a class-sorted store vs a full permutation.

Defaults follow the issue's measurement: 256x256x3 uint8 samples, batch 64, 2 cores. Setup
happens outside the timed parts; each timing is the median of ``--runs`` runs after a
warm-up, and compared rows are interleaved so machine noise hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from PIL import Image

from benchmarks.bench_loader_setup import (
    PillowJpegDataset,
    class_entropy,
    decoded_store,
    environment_line,
    random_store,
)
from benchmarks.common import Row, interleaved, store_bytes, timed_call
from loaders import StoreLoader
from loaders.batching.plan import epoch_plan

__all__ = ["main"]

CONTIGUOUS = "numpy memmap contiguous batches (file order)"
SAME_ORDER = "numpy memmap gather (same order, 1 copy)"
MAPPED_WHOLE = "StoreLoader io='mmap' map_bytes=store size"
DEFAULT = "StoreLoader (no augment, device=cpu)"


def _cpu_seconds(children: bool = False) -> float:
    """Return this process's CPU seconds (all threads), plus its live children's if asked."""
    total = time.process_time()
    if children:
        for child in psutil.Process().children(recursive=True):
            try:
                total += sum(child.cpu_times()[:2])
            except psutil.NoSuchProcess:
                continue
    return total


def _with_children() -> float:
    return _cpu_seconds(children=True)


def _drain(batches: Iterable[Any]) -> int:
    n = 0
    for batch in batches:
        n += len(batch["index"] if isinstance(batch, dict) else batch[1])
    return n


def _memmap_epoch(mm: np.ndarray, order: np.ndarray, batch: int) -> int:
    for lo in range(0, len(order) - batch + 1, batch):
        out = np.empty((batch, *mm.shape[1:]), mm.dtype)
        np.take(mm, order[lo : lo + batch], axis=0, out=out, mode="clip")
        torch.from_numpy(out)
    return len(order) // batch * batch


def _memmap_contiguous_epoch(mm: np.ndarray, batch: int) -> int:
    """Copy contiguous batches of the memmap in file order: one sequential copy per batch."""
    n = len(mm) // batch * batch
    for lo in range(0, n, batch):
        out = np.empty((batch, *mm.shape[1:]), mm.dtype)
        np.copyto(out, mm[lo : lo + batch])
        torch.from_numpy(out)
    return n


def _memmap_chunks_epoch(
    mm: np.ndarray, order: np.ndarray, chunk: int, batch: int, windows: Any
) -> int:
    """Copy each window's chunks out of the memmap, then gather batches from them (2 copies)."""
    pending: list[np.ndarray] = []
    for w in windows:
        chunks = np.asarray(w.chunks)
        buf = np.concatenate([mm[c * chunk : (c + 1) * chunk] for c in chunks.tolist()])
        idx = order[w.start : w.stop]
        sorter = np.argsort(chunks)
        slot = sorter[np.searchsorted(chunks, idx // chunk, sorter=sorter)]
        pending.append(np.take(buf, slot * chunk + idx % chunk, axis=0))
    out = np.concatenate(pending)  # (a real loader would cut batches across windows)
    for lo in range(0, len(out) - batch + 1, batch):
        torch.from_numpy(out[lo : lo + batch])
    return len(order) // batch * batch


def _zarr_epoch(path: Path, order: np.ndarray, chunk: int, batch: int, windows: Any) -> int:
    import zarr

    arr: Any = zarr.open_array(path / "image", mode="r")
    for w in windows:
        rows = {int(c): arr[c * chunk : (c + 1) * chunk] for c in w.chunks}
        idx = order[w.start : w.stop]
        np.stack([rows[int(i) // chunk][int(i) % chunk] for i in idx])
    return len(order) // batch * batch


def _row(name: str, rate: float, cpu: float, ref: tuple[float, float] | None = None) -> str:
    ratio = (
        ""
        if ref is None
        else (f"  speed x{rate / ref[0]:.2f}  cpu x{cpu / max(ref[1], 1e-12):.3f}")
    )
    return f"  {name:<44} {rate:>9,.0f} samples/s  {cpu * 1e3:8.4f} ms CPU/sample{ratio}"


def bench_throughput(root: Path, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    store, npy = random_store(root / "rand", args.samples, args.size)
    mm = np.load(str(npy), mmap_mode="r")
    loader = StoreLoader(store, args.batch, device="cpu", num_threads=args.threads)
    always = StoreLoader(store, args.batch, device="cpu", num_threads=args.threads, verify="always")
    preads = StoreLoader(store, args.batch, device="cpu", num_threads=args.threads, io="pread")
    size = store_bytes(store)
    whole = StoreLoader(
        store, args.batch, device="cpu", num_threads=args.threads, io="mmap", map_bytes=size
    )
    inline = StoreLoader(store, args.batch, device="cpu", num_threads=1, prefetch=0)
    print(f"  defaults: io='auto' resolved to {loader.source.image.io!r} for {size >> 20} MiB")
    plan = loader.plan(0)
    rows: dict[str, Row] = {
        CONTIGUOUS: lambda _: _memmap_contiguous_epoch(mm, args.batch),
        SAME_ORDER: lambda _: _memmap_epoch(mm, plan.order, args.batch),
        DEFAULT: lambda _: _drain(loader),
        "StoreLoader verify='always'": lambda _: _drain(always),
        "StoreLoader io='pread'": lambda _: _drain(preads),
        MAPPED_WHOLE: lambda _: _drain(whole),
        "StoreLoader prefetch=0 num_threads=1 (inline)": lambda _: _drain(inline),
    }
    res = interleaved(rows, args.runs, dict.fromkeys(rows, _cpu_seconds))
    res["numpy memmap chunk copy + gather (2 copies, 1 run)"] = timed_call(
        lambda _: _memmap_chunks_epoch(mm, plan.order, 32, args.batch, plan.windows),
        0,
        _cpu_seconds,
    )
    res["zarr-python whole chunks (1 run)"] = timed_call(
        lambda _: _zarr_epoch(store, plan.order, 32, args.batch, plan.windows), 0, _cpu_seconds
    )
    return res


def bench_classic(root: Path, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    from loaders.augment import TrainAugment

    jpegs = PillowJpegDataset.sample(root / "jpeg", args.jpegs, args.size)
    store = decoded_store(root / "dec", jpegs, args.size + args.size // 8)
    classic = torch.utils.data.DataLoader(
        jpegs,
        batch_size=args.batch,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        drop_last=True,
    )
    plain = StoreLoader(store, args.batch, device="cpu", num_threads=args.threads)
    aug = TrainAugment(size=(args.size, args.size))
    ready = StoreLoader(store, args.batch, device="cpu", augment=aug, num_threads=args.threads)
    classic_row = "classic DataLoader+Pillow (2 workers, RRC+flip+norm)"
    rows: dict[str, Row] = {
        classic_row: lambda _: _drain(classic),
        "StoreLoader (no augment)": lambda _: _drain(plain),
        "StoreLoader + TrainAugment (RRC+flip+norm, cpu)": lambda _: _drain(ready),
    }
    clocks = {**dict.fromkeys(rows, _cpu_seconds), classic_row: _with_children}
    return interleaved(rows, args.runs, clocks)


_RSS_CHILD = """
import json, sys
from benchmarks.common import Row, interleaved, timed_call
from loaders import StoreLoader

def kib(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))

store, batch, prefetch, io, map_bytes = sys.argv[1:]
loader = StoreLoader(store, int(batch), prefetch=int(prefetch), io=io, map_bytes=int(map_bytes))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS: imports no longer count
base = {k: kib(k) for k in ("VmRSS:", "RssAnon:", "RssFile:")}
peak = dict(base)
for _ in loader:
    for k in ("RssAnon:", "RssFile:"):
        peak[k] = max(peak[k], kib(k))
peak["VmRSS:"] = kib("VmHWM:")
print(json.dumps({k.rstrip(":"): (peak[k] - base[k]) / 1024 for k in base}))
"""


def bench_rss(root: Path, args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    """Return (setting, peak MiB above the RSS after open: total, anon, file) rows."""
    rows = []
    for n in (args.rss_samples, 4 * args.rss_samples):
        store, _ = random_store(root / f"rss{n}", n, args.size, npy=False)
        size_mb = store_bytes(store) / 2**20
        for prefetch, io, map_mb in (
            (2, "mmap", 1024),
            (8, "mmap", 1024),
            (2, "mmap", 32),
            (2, "pread", 0),
        ):
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _RSS_CHILD,
                    str(store),
                    str(args.batch),
                    str(prefetch),
                    io,
                    str(map_mb << 20),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            name = f"store {n:>5} samples ({size_mb:5.0f} MiB) prefetch={prefetch} io={io}" + (
                f" map={map_mb}MiB" if io == "mmap" else ""
            )
            rows.append((name, json.loads(out.stdout.strip().splitlines()[-1])))
    return rows


def bench_shuffle(args: argparse.Namespace) -> list[tuple[str, float]]:
    n, classes, chunk = 20_000, 10, 32
    labels = np.arange(n) * classes // n  # class-sorted: the worst case for chunk reading
    rng = np.random.default_rng(0)
    rows = [
        ("full random permutation", class_entropy(labels[rng.permutation(n)], args.batch, classes)),
        ("no shuffle (store order)", class_entropy(labels, args.batch, classes)),
    ]
    for buffer_chunks in (1, 4, 8, 16):
        order = epoch_plan(
            n,
            chunk,
            seed=0,
            epoch=0,
            rank=0,
            world_size=1,
            shuffle=True,
            buffer_chunks=buffer_chunks,
            valid=None,
        ).order
        rows.append(
            (
                f"StoreLoader buffer_chunks={buffer_chunks}",
                class_entropy(labels[order], args.batch, classes),
            )
        )
    order = epoch_plan(
        n, chunk, seed=0, epoch=0, rank=0, world_size=1, shuffle=True, buffer_chunks=8, valid=None
    ).order
    built = labels[rng.permutation(n)]  # precompute stores samples in a seeded permutation
    rows.append(
        (
            "StoreLoader buffer_chunks=8, built store",
            class_entropy(built[order], args.batch, classes),
        )
    )
    return rows


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=2048, help="samples of the throughput store")
    p.add_argument(
        "--size", type=int, default=256, help="stored side length S (the issue measured 256)"
    )
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="StoreLoader num_threads")
    p.add_argument("--jpegs", type=int, default=768, help="JPEGs for the classic comparison")
    p.add_argument("--rss-samples", type=int, default=1024)
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--only", default="12345", help="sections to run, e.g. 14")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run every row and print the report."""
    args = _parse(argv)
    Image.init()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        root = Path(tmp)
        print(f"# bench_loader  {environment_line()}")
        print(
            f"# S={args.size} batch={args.batch} runs={args.runs} (median after warm-up), "
            f"threads={args.threads}, pid={os.getpid()}"
        )
        if "1" in args.only:
            _print_throughput(root, args)
        if "2" in args.only or "3" in args.only:
            _print_classic(root, args)
        if "4" in args.only:
            _print_rss(root, args)
        if "5" in args.only:
            _print_shuffle(args)


def _print_throughput(root: Path, args: argparse.Namespace) -> None:
    print(f"\n[1] loader alone from page cache, {args.samples} samples")
    res = bench_throughput(root, args)
    ref = res[SAME_ORDER]
    for name, (rate, cpu) in res.items():
        print(_row(name, rate, cpu, None if name == SAME_ORDER else ref))
    for name in (
        DEFAULT,
        "StoreLoader verify='always'",
        "StoreLoader io='pread'",
        MAPPED_WHOLE,
        "StoreLoader prefetch=0 num_threads=1 (inline)",
    ):
        print(
            f"  -> {name} / memmap samples/s: same order {res[name][0] / ref[0]:.2f} "
            f"(target >= 0.7), contiguous {res[name][0] / res[CONTIGUOUS][0]:.2f} "
            "(target >= 0.8)"
        )


def _print_classic(root: Path, args: argparse.Namespace) -> None:
    print(f"\n[2,3] vs classic DataLoader, {args.jpegs} JPEGs (CPU incl. worker processes)")
    res = bench_classic(root, args)
    ref = res["classic DataLoader+Pillow (2 workers, RRC+flip+norm)"]
    for name, (rate, cpu) in res.items():
        print(_row(name, rate, cpu, None if rate == ref[0] else ref))
    plain, ready = (
        res["StoreLoader (no augment)"],
        res["StoreLoader + TrainAugment (RRC+flip+norm, cpu)"],
    )
    print(f"  -> loader CPU/sample = 1/{ref[1] / plain[1]:.0f} of classic (target <= 1/50)")
    print(f"  -> training-ready samples/s = {ready[0] / ref[0]:.1f}x classic (target >= 4x)")


def _print_rss(root: Path, args: argparse.Namespace) -> None:
    print(
        f"\n[4] peak RSS of a loader process over one epoch, batch {args.batch}, "
        "MiB above its RSS after open (anon = buffers, file = mapped shard pages)"
    )
    for name, mib in bench_rss(root, args):
        print(
            f"  {name:<62} total +{mib['VmRSS']:6.1f}  anon +{mib['RssAnon']:6.1f}  "
            f"file +{mib['RssFile']:6.1f}"
        )


def _print_shuffle(args: argparse.Namespace) -> None:
    print(
        f"\n[5] shuffle quality: mean class entropy per batch of {args.batch}\n"
        "    (10 classes, class-sorted store unless 'built', 20,000 samples, chunk 32)"
    )
    rows = bench_shuffle(args)
    best = rows[0][1]
    for name, bits in rows:
        print(f"  {name:<44} {bits:5.3f} bits  ({bits / best:.2f} of random)")


if __name__ == "__main__":
    main()
