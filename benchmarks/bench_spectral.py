"""Spectral patches per second: StoreLoader vs a memmap of the same bytes vs ``np.load`` per file.

``python -m benchmarks.bench_spectral [--height 64] [--bands 100] [--patch 9] [--runs 3]``
writes a synthetic scene (:func:`benchmarks.spectral_data.make_scene`), builds its patch store
(``precompute build SCENE --labels GT --patch P``) and times, interleaved run by run on the same
machine (median of ``--runs`` epochs after one warm-up epoch each; loaders are opened once,
outside the timed part, and serve one epoch per run):

* ``store raw``: ``StoreLoader(augment=None)``, ``[B, P, P, C]`` as stored, default settings
  (``io="auto"``: mapped when the store fits in ``map_bytes``, else ``pread``; a prefetch
  thread, two read threads);
* ``store raw mmap``: the same with ``io="mmap"`` and ``map_bytes`` covering the store (its
  shard files stay mapped across epochs, as the memmap reference keeps its mapping), read on
  the calling thread (``prefetch=0, num_threads=1``, as the reference reads);
* ``store raw ram``: ``io="ram"``: the store read into memory once (at open, outside the
  timed part) and each batch one gather, as from the memmap; read on the calling thread, as
  ``store raw mmap``;
* ``store aug``: ``StoreLoader`` with ``TrainAugment`` (crop/flip, per-band normalise) to
  ``[B, C, P, P]`` float32;
* ``memmap``: the store's patches as one ``.npy``, memory-mapped once (as a ``Dataset`` keeps
  its memmap) and read batch by batch in the order ``store raw`` served its first epoch (the
  bytes-on-disk reference);
* ``np.load``: a classic ``Dataset`` doing ``np.load`` of one ``.npy`` file per patch, under a
  ``DataLoader`` with 2 workers (``benchmarks.spectral_data.ArrayFileDataset``).

It prints patches/s of each and the ratios of each store row to ``memmap`` and to ``np.load``,
then the peak RSS of a process that streams one epoch of ``StoreLoader`` for this scene and
for one of twice the rows, with ``io="pread"`` (flat: it does not grow with the dataset),
the default ``io="auto"`` (a store that fits in ``map_bytes`` stays mapped, and mapped pages
count in RSS: bounded by ``map_bytes``, not by the dataset) and ``io="ram"`` (the store's
bytes in private memory: RSS grows with the dataset up to ``map_bytes``).
Setup is outside the timed part; results are printed, never committed. The
timing process runs torch with ``--torch-threads`` intra-op threads (default 1): the augmented
path is a handful of small torch ops per batch, which an OpenMP pool stalls on when the machine
has fewer free cores than threads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import zarr

from benchmarks.common import store_bytes
from benchmarks.spectral_data import ArrayFileDataset, make_scene, write_patches
from loaders.augment import RandomResizedCrop, TrainAugment
from loaders.store.open_store import MAP_BYTES
from loaders.torch_loader import StoreLoader
from precompute.cli import main as precompute

__all__ = ["build_scene_store", "main", "peak_rss_mb"]

BATCH = 64  # --batch
RAM_BUDGET = 4 * 2**30  # io="ram" in the RSS runs: the large scene's store (1 GiB) fits


def build_scene_store(work: Path, height: int, bands: int, patch: int) -> Path:
    """Write a ``height x height x bands`` scene and build its patch store in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    scene, gt = make_scene(height, height, bands, 16, seed=0)
    np.save(work / "scene.npy", scene)
    np.save(work / "gt.npy", gt)
    out = work / "store"
    precompute(["build", str(work / "scene.npy"), "--out", str(out), "--labels", "gt.npy",
                "--patch", str(patch), "--quiet"])  # fmt: skip
    return out


def _store_epoch(loader: StoreLoader, order: list[int] | None = None) -> int:
    """One epoch of ``loader`` (opened once, outside the timed part); the next one follows.

    Like the memmap reference, nothing is computed per batch (a torch reduction over
    ``is_pad`` is a noticeable share of a batch of small patches). The loaders here drop the
    last partial batch (``drop_last=True``), so no batch holds a pad.
    """
    n = 0
    for batch in loader:
        if order is not None:
            order.extend(batch["index"][~batch["is_pad"]].tolist())
        n += batch["index"].shape[0]  # Tensor.__len__ costs more than a shape lookup
    return n


def _memmap_epoch(data: np.ndarray, order: np.ndarray) -> int:
    for start in range(0, len(order), BATCH):
        torch.from_numpy(np.ascontiguousarray(data[order[start : start + BATCH]]))
    return len(order)


def _npload_epoch(folder: Path) -> int:
    loader = torch.utils.data.DataLoader(
        ArrayFileDataset(folder), batch_size=BATCH, shuffle=True, num_workers=2
    )
    return sum(len(labels) for _, labels in loader)


def _interleaved(runners: dict[str, Callable[[], int]], runs: int) -> dict[str, float]:
    """Patches/s of each runner: one warm-up, then ``runs`` rounds, runners interleaved."""
    for run in runners.values():
        run()
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(runs):
        for name, run in runners.items():
            t0 = time.perf_counter()
            n = run()
            rates[name].append(n / (time.perf_counter() - t0))
    return {name: statistics.median(r) for name, r in rates.items()}


def peak_rss_mb(store: Path, io: str = "auto") -> float:
    """Peak RSS (MiB) of a fresh process streaming one epoch of ``store`` (augment=None)."""
    code = (
        "import sys\n"
        "from benchmarks.common import peak_rss_mib\n"
        "from loaders.torch_loader import StoreLoader\n"
        f"for b in StoreLoader(sys.argv[1], {BATCH}, augment=None, io=sys.argv[2],\n"
        f"                     map_bytes={RAM_BUDGET if io == 'ram' else MAP_BYTES}): pass\n"
        "print(peak_rss_mib())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code, str(store), io], capture_output=True,
                          text=True, check=True, env=env)  # fmt: skip
    return float(done.stdout.split()[-1])


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--height", type=int, default=64, help="Scene side (rows = columns).")
    p.add_argument("--bands", type=int, default=100)
    p.add_argument("--patch", type=int, default=9)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch", type=int, default=BATCH)
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch intra-op threads here (default 1: on a busy machine a pool of 2 stalls).",
    )
    p.add_argument("--work", help="Folder for the data (default: a temporary one).")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Set up, time side by side, print the rates, ratios and RSS."""
    args = _args(argv)
    global BATCH
    BATCH = args.batch
    torch.set_num_threads(args.torch_threads)
    with tempfile.TemporaryDirectory(prefix="nostall-bench-spectral-") as tmp:
        work = Path(args.work or tmp)
        store = build_scene_store(work / "small", args.height, args.bands, args.patch)
        images = zarr.open_array(str(store / "image"), mode="r")[:]
        np.save(work / "patches.npy", images)
        scene, gt = make_scene(args.height, args.height, args.bands, 16, seed=0)
        write_patches(work / "files", scene, gt, args.patch)
        order: list[int] = []
        _store_epoch(StoreLoader(store, BATCH, seed=0, augment=None), order)
        raw = StoreLoader(store, BATCH, seed=0, augment=None)
        size = store_bytes(store)
        mapped = StoreLoader(store, BATCH, seed=0, augment=None, io="mmap", map_bytes=size,
                             prefetch=0, num_threads=1)  # fmt: skip
        memmap = np.load(work / "patches.npy", mmap_mode="r")
        served = np.array(order)
        ram = StoreLoader(store, BATCH, seed=0, augment=None, io="ram", prefetch=0, num_threads=1)
        aug = TrainAugment(size=(args.patch, args.patch), crop=RandomResizedCrop(scale=(0.6, 1.0)))
        augmented = StoreLoader(store, BATCH, seed=0, augment=aug)
        rates = _interleaved(
            {
                "store raw": lambda: _store_epoch(raw),
                "store raw mmap": lambda: _store_epoch(mapped),
                "store raw ram": lambda: _store_epoch(ram),
                "store aug": lambda: _store_epoch(augmented),
                "memmap": lambda: _memmap_epoch(memmap, served),
                "np.load": lambda: _npload_epoch(work / "files"),
            },
            args.runs,
        )
        n = len(order)
        print(f"{n} patches of {args.patch}x{args.patch}x{args.bands} float32, batch {BATCH}, "
              f"torch threads {args.torch_threads}")  # fmt: skip
        for name, rate in rates.items():
            print(f"{name:14s} {rate:10.0f} patches/s")
        for a in ("store raw", "store raw mmap", "store raw ram", "store aug"):
            for b in ("memmap", "np.load"):
                print(f"ratio {a} / {b}: {rates[a] / rates[b]:.2f}x")
        big = build_scene_store(work / "big", 2 * args.height, args.bands, args.patch)
        n_big = zarr.open_array(str(big / "key"), mode="r").shape[0]
        for io, what in (("pread", "no mapped pages"),
                         ("auto", "a store that fits in map_bytes stays mapped"),
                         ("ram", "the store in memory: grows with it")):  # fmt: skip
            print(f"loader peak RSS, io={io!r} ({what}): {peak_rss_mb(store, io):.0f} MiB "
                  f"for {n} patches, {peak_rss_mb(big, io):.0f} MiB for {n_big}")  # fmt: skip


if __name__ == "__main__":
    main()
