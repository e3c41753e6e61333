"""Benchmark StoreLoader's host side against a numpy memmap and a classic DataLoader.

Run: ``.venv/bin/python -m benchmarks.suite.loader`` (``--help`` for sizes). Rows:

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
4. Peak RSS of a loader process (a fresh one per setting, :func:`rss_epoch`) for two store
   sizes and two prefetch settings, above its RSS after open.
5. Shuffle quality: mean class entropy per batch on a class-sorted store vs a full permutation.
6. Choosing samples (:mod:`benchmarks.suite.loader.choosing`): a subset, weighted sampling and a
   mixture vs the plain loader on the same store (samples/s and CPU per sample, target >= 0.9),
   and what reading whole chunks approximates (read rows per sample, weighted draws' spread).

Defaults follow the issue's measurement: 256x256x3 uint8 samples, batch 64, 2 cores. Setup
happens outside the timed parts; each timing is ``--runs`` runs after a warm-up, and compared
rows are interleaved so machine noise hits both sides alike (:mod:`benchmarks.runner`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchmarks.common import store_bytes
from benchmarks.environment import environment_line
from benchmarks.image_data import (
    PillowJpegDataset,
    decoded_store,
    memmap_chunks_epoch,
    memmap_contiguous_epoch,
    memmap_gather_epoch,
    random_store,
    shuffle_entropies,
    zarr_epoch,
)
from benchmarks.runner import Bench, Command, Line, Results, Row, Run, add_json_argument, ratio
from benchmarks.runner.rows import Clock
from benchmarks.suite.loader.choosing import CHOOSING_LINES, approximation_notes, choosing_rows
from loaders import StoreLoader

__all__ = ["main"]

CONTIGUOUS = "numpy memmap contiguous batches (file order)"
SAME_ORDER = "numpy memmap gather (same order, 1 copy)"
MAPPED_WHOLE = "StoreLoader io='mmap' map_bytes=store size"
DEFAULT = "StoreLoader (no augment, device=cpu)"


def _drain(batches: Iterable[Any]) -> int:
    n = 0
    for batch in batches:
        n += len(batch["index"] if isinstance(batch, dict) else batch[1])
    return n


LOADER_ROWS = (
    DEFAULT,
    "StoreLoader verify='always'",
    "StoreLoader io='pread'",
    MAPPED_WHOLE,
    "StoreLoader prefetch=0 num_threads=1 (inline)",
)


def _rows(bodies: dict[str, Callable[[], int]], clock: Clock = "process") -> list[Row]:
    return [Row(name, _call(body), clock) for name, body in bodies.items()]


def _call(body: Callable[[], int]) -> Callable[[Run], int]:
    return lambda run: body()


def throughput_rows(root: Path, args: argparse.Namespace, bench: Bench) -> tuple[list[Row], ...]:
    """Section 1's interleaved rows, then the rows timed once (chunk copy, zarr-python)."""
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
    bench.note(f"  defaults: io='auto' resolved to {loader.source.image.io!r} for {size >> 20} MiB")
    plan = loader.plan(0)
    interleaved = {
        CONTIGUOUS: lambda: memmap_contiguous_epoch(mm, args.batch),
        SAME_ORDER: lambda: memmap_gather_epoch(mm, plan.order, args.batch),
        DEFAULT: lambda: _drain(loader),
        "StoreLoader verify='always'": lambda: _drain(always),
        "StoreLoader io='pread'": lambda: _drain(preads),
        MAPPED_WHOLE: lambda: _drain(whole),
        "StoreLoader prefetch=0 num_threads=1 (inline)": lambda: _drain(inline),
    }
    once = {
        "numpy memmap chunk copy + gather (2 copies)": lambda: memmap_chunks_epoch(
            mm, plan.order, 32, args.batch, plan.windows
        ),
        "zarr-python whole chunks": lambda: zarr_epoch(
            store, plan.order, 32, args.batch, plan.windows
        ),
    }
    return _rows(interleaved), _rows(once)


def throughput_lines() -> list[Line]:
    """Each loader setting over the two memmap references, by samples/s."""
    lines = []
    for name in LOADER_ROWS:
        head = f"-> {name} / memmap samples/s:"
        lines.append(
            ratio(f"{head} same order", name, SAME_ORDER, fmt="{:.2f}", note="(target >= 0.7)")
        )
        lines.append(
            ratio(f"{head} contiguous", name, CONTIGUOUS, fmt="{:.2f}", note="(target >= 0.8)")
        )
    return lines


CLASSIC = "classic DataLoader+Pillow (2 workers, RRC+flip+norm)"
PLAIN = "StoreLoader (no augment)"
READY = "StoreLoader + TrainAugment (RRC+flip+norm, cpu)"


def classic_rows(root: Path, args: argparse.Namespace) -> list[Row]:
    """Sections 2 and 3: the classic DataLoader (CPU with its workers) and the loader."""
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
    rows = _rows({PLAIN: lambda: _drain(plain), READY: lambda: _drain(ready)})
    return [*_rows({CLASSIC: lambda: _drain(classic)}, "tree"), *rows]


def _cpu_share(results: Results) -> float:
    return results[CLASSIC].median("cpu_ms") / results[PLAIN].median("cpu_ms")


CLASSIC_LINES = (
    Line("-> loader CPU/sample =", _cpu_share, "1/{:.0f} of classic", "(target <= 1/50)"),
    ratio(
        "-> training-ready samples/s =",
        READY,
        CLASSIC,
        fmt="{:.1f}x classic",
        note="(target >= 4x)",
    ),
)


def _kib(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))


def rss_epoch(store: str, batch: str, prefetch: str, io: str, map_bytes: str) -> dict[str, float]:
    """(In a fresh process) one loader epoch; peak MiB above the RSS after open, by kind."""
    loader = StoreLoader(
        store,
        int(batch),
        prefetch=int(prefetch),
        io=io,
        map_bytes=int(map_bytes),
    )
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS: imports no longer count
    base = {k: _kib(k) for k in ("VmRSS:", "RssAnon:", "RssFile:")}
    peak = dict(base)
    for _ in loader:
        for k in ("RssAnon:", "RssFile:"):
            peak[k] = max(peak[k], _kib(k))
    peak["VmRSS:"] = _kib("VmHWM:")
    names = {"VmRSS:": "total_mib", "RssAnon:": "anon_mib", "RssFile:": "file_mib"}
    return {names[k]: (peak[k] - base[k]) / 1024 for k in base}


def rss_rows(root: Path, args: argparse.Namespace) -> list[Command]:
    """Section 4: a fresh loader process per store size and setting."""
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
            name = f"store {n:>5} samples ({size_mb:5.0f} MiB) prefetch={prefetch} io={io}" + (
                f" map={map_mb}MiB" if io == "mmap" else ""
            )
            argv = (str(store), str(args.batch), str(prefetch), io, str(map_mb << 20))
            show = ("total_mib", "anon_mib", "file_mib")
            rows.append(Command(name, "benchmarks.suite.loader.bench:rss_epoch", argv, show=show))
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
    p.add_argument("--only", default="123456", help="sections to run, e.g. 14")
    add_json_argument(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run every section and print the report."""
    args = _parse(argv)
    Image.init()
    bench = Bench("loader", args.json)
    with bench, tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        root = Path(tmp)
        bench.note(
            f"# bench_loader  {environment_line()}",
            f"# S={args.size} batch={args.batch} runs={args.runs}, threads={args.threads}, "
            f"pid={os.getpid()}",
        )
        if "1" in args.only:
            _throughput(root, args, bench)
        if "2" in args.only or "3" in args.only:
            title = f"[2,3] vs classic DataLoader, {args.jpegs} JPEGs (CPU incl. worker processes)"
            rows = classic_rows(root, args)
            bench.measure(title, rows, runs=args.runs, lines=CLASSIC_LINES)
        if "4" in args.only:
            title = (
                f"[4] peak RSS of a loader process over one epoch, batch {args.batch}, MiB above "
                "its RSS after open (anon = buffers, file = mapped shard pages)"
            )
            bench.measure(title, rss_rows(root, args), runs=1, warmup=0)
        if "5" in args.only:
            _shuffle(args, bench)
        if "6" in args.only:
            title = f"[6] choosing samples, {args.samples} samples (same store)"
            bench.measure(title, choosing_rows(root, args), runs=args.runs, lines=CHOOSING_LINES)
            approximation_notes(root, args, bench.note)


def _throughput(root: Path, args: argparse.Namespace, bench: Bench) -> None:
    interleaved, once = throughput_rows(root, args, bench)
    title = f"[1] loader alone from page cache, {args.samples} samples"
    bench.measure(title, interleaved, runs=args.runs, lines=throughput_lines())
    bench.measure("[1] references timed once", once, runs=1, warmup=0)


def _shuffle(args: argparse.Namespace, bench: Bench) -> None:
    bench.note(
        f"\n[5] shuffle quality: mean class entropy per batch of {args.batch}",
        "    (10 classes, class-sorted store unless 'built', 20,000 samples, chunk 32)",
    )
    rows = shuffle_entropies(args.batch)
    best = rows[0][1]
    bench.note(
        *(f"  {name:<44} {bits:5.3f} bits  ({bits / best:.2f} of random)" for name, bits in rows)
    )


if __name__ == "__main__":
    main()
