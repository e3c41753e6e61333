"""Spectral patches per second: StoreLoader vs a memmap of the same bytes vs ``np.load`` per file.

``python -m benchmarks.suite.spectral [--height 64] [--bands 100] [--patch 9] [--runs 3]``
writes a synthetic scene (:func:`benchmarks.spectral_data.make_scene`), builds its patch store
(``precompute build SCENE --labels GT --patch P``) and times, interleaved run by run on the same
machine (:mod:`benchmarks.runner`: ``--runs`` epochs after one warm-up epoch each; loaders are
opened once, outside the timed part, and serve one epoch per run):

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
then the peak RSS (its ``VmHWM``) of a fresh process that streams one epoch of ``StoreLoader``
(:func:`stream_epoch`) for this scene and
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
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import store_bytes
from benchmarks.runner import Bench, Command, Line, Row, Run, add_json_argument, ratio
from benchmarks.spectral_data import ArrayFileDataset, make_scene, write_patches
from loaders.augment import RandomResizedCrop, TrainAugment
from loaders.store.open_store import MAP_BYTES
from loaders.torch_loader import StoreLoader

__all__ = ["build_scene_store", "main", "stream_epoch"]

BATCH = 64  # --batch
RAM_BUDGET = 4 * 2**30  # io="ram" in the RSS runs: the large scene's store (1 GiB) fits


def build_scene_store(work: Path, height: int, bands: int, patch: int) -> Path:
    """Write a ``height x height x bands`` scene and build its patch store in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    scene, gt = make_scene(height, height, bands, 16, seed=0)
    np.save(work / "scene.npy", scene)
    np.save(work / "gt.npy", gt)
    from precompute.cli import main as precompute  # lazy: the RSS children leave it out

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


def stream_epoch(store: str, io: str, batch: str) -> dict[str, float]:
    """(In a fresh process) stream one epoch of ``store`` (augment=None) with ``io``."""
    budget = RAM_BUDGET if io == "ram" else MAP_BYTES
    n = 0
    for b in StoreLoader(store, int(batch), augment=None, io=io, map_bytes=budget):
        n += b["index"].shape[0]
    return {"patches": float(n)}


STORE_ROWS = ("store raw", "store raw mmap", "store raw ram", "store aug")
RSS_IO = (
    ("pread", "no mapped pages"),
    ("auto", "a store that fits in map_bytes stays mapped"),
    ("ram", "the store in memory: grows with it"),
)


def rss_rows(stores: dict[int, Path]) -> tuple[list[Command], list[Line]]:
    """A fresh process per store and ``io``: its peak RSS; then large over small per ``io``."""
    rows, lines = [], []
    small, large = stores
    for io, what in RSS_IO:
        names = {n: f"loader peak RSS, io={io!r}, {n} patches" for n in stores}
        target = "benchmarks.suite.spectral:stream_epoch"
        for n, store in stores.items():
            rows.append(
                Command(names[n], target, (str(store), io, str(BATCH)), show=("peak_rss_mib",))
            )
        label = f"loader peak RSS, io={io!r} ({what}), {large} / {small} patches:"
        lines.append(ratio(label, names[large], names[small], figure="peak_rss_mib"))
    return rows, lines


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
    add_json_argument(p)
    return p.parse_args(argv)


def _epochs(loader: StoreLoader) -> Callable[[Run], int]:
    return lambda run: _store_epoch(loader)


def _rows(
    loaders: dict[str, StoreLoader], memmap: np.ndarray, served: np.ndarray, files: Path
) -> list[Row]:
    rows = [Row(name, _epochs(loader), unit="patch") for name, loader in loaders.items()]
    rows.append(Row("memmap", lambda run: _memmap_epoch(memmap, served), unit="patch"))
    rows.append(Row("np.load", lambda run: _npload_epoch(files), "tree", unit="patch"))
    return rows


def main(argv: list[str] | None = None) -> None:
    """Set up, time side by side, print the rates, ratios and RSS."""
    import zarr

    args = _args(argv)
    global BATCH
    BATCH = args.batch
    torch.set_num_threads(args.torch_threads)
    with (
        Bench("spectral", args.json) as bench,
        tempfile.TemporaryDirectory(prefix="nostall-bench-spectral-") as tmp,
    ):
        work = Path(args.work or tmp)
        store = build_scene_store(work / "small", args.height, args.bands, args.patch)
        images = zarr.open_array(str(store / "image"), mode="r")[:]
        np.save(work / "patches.npy", images)
        scene, gt = make_scene(args.height, args.height, args.bands, 16, seed=0)
        write_patches(work / "files", scene, gt, args.patch)
        order: list[int] = []
        _store_epoch(StoreLoader(store, BATCH, seed=0, augment=None), order)
        size = store_bytes(store)
        aug = TrainAugment(size=(args.patch, args.patch), crop=RandomResizedCrop(scale=(0.6, 1.0)))
        loaders = {
            "store raw": StoreLoader(store, BATCH, seed=0, augment=None),
            "store raw mmap": StoreLoader(store, BATCH, seed=0, augment=None, io="mmap",
                                          map_bytes=size, prefetch=0, num_threads=1),
            "store raw ram": StoreLoader(store, BATCH, seed=0, augment=None, io="ram",
                                         prefetch=0, num_threads=1),
            "store aug": StoreLoader(store, BATCH, seed=0, augment=aug),
        }  # fmt: skip
        memmap = np.load(work / "patches.npy", mmap_mode="r")
        rows = _rows(loaders, memmap, np.array(order), work / "files")
        lines = [
            ratio(f"ratio {a} / {b}:", a, b) for a in STORE_ROWS for b in ("memmap", "np.load")
        ]
        title = (
            f"{len(order)} patches of {args.patch}x{args.patch}x{args.bands} float32, "
            f"batch {BATCH}, torch threads {args.torch_threads}"
        )
        bench.measure(title, rows, runs=args.runs, lines=lines)
        big = build_scene_store(work / "big", 2 * args.height, args.bands, args.patch)
        n_big = zarr.open_array(str(big / "key"), mode="r").shape[0]
        rss, rss_lines = rss_rows({len(order): store, n_big: big})
        bench.measure("peak RSS of a fresh loader process", rss, runs=1, warmup=0, lines=rss_lines)


if __name__ == "__main__":
    main()
