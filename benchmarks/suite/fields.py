"""Segmentation training-ready batches per second: StoreLoader vs a classic DataLoader; peak RSS.

Run: ``.venv/bin/python -m benchmarks.suite.fields [--images 192] [--batch 32] [--runs 3]``

Setup (not timed): a segmentation folder of PNG image/mask pairs (4 classes, mixed sizes,
:func:`benchmarks.fields_data.make_segmentation`) and its mask store, built by
``precompute.job.build`` on a local Ray (fields ``image`` + ``mask``). Timed, side by side in
one run, ``--runs`` epochs after a warm-up epoch, the rows taking turns epoch by epoch
(:mod:`benchmarks.runner`) so the host's load hits them alike; every batch is
training-ready: a float image normalised ``[B, 3, S, S]`` and an integer mask ``[B, S, S]``
after one random resized crop + flip per sample:

* ``classic``: torch DataLoader, 2 worker processes over
  :class:`benchmarks.fields_data.PillowPairs` (Pillow decodes both PNGs per item, then the
  paired crop (bilinear / nearest) + flip + normalise).
* ``StoreLoader + TrainAugment``: the mask store, one draw per sample applied to the image
  (bilinear) and the mask (nearest), on the CPU.

Then the peak RSS (its own ``VmHWM``) of a fresh process that makes a ``StoreLoader`` over the store
and runs one epoch (:func:`stream_epoch`), for the store and one ``--rss-factor`` times larger: the
loader's memory should not grow with the dataset. Prints samples/s, CPU ms per sample, ratios and
RSS. Results are not committed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from benchmarks.fields_data import PillowPairs, make_segmentation
from benchmarks.runner import Bench, Command, Line, Row, add_json_argument, ratio

__all__ = ["main"]

SEED = 0
CLASSIC = "classic DataLoader (2 workers, Pillow PNG pairs)"
STORE = "StoreLoader + TrainAugment (image + mask)"
IMAGE_SIDES = (240, 360)  # each image's sides drawn in this range


def build_stores(root: Path, counts: list[int], store_size: int) -> list[tuple[Path, Path]]:
    """Write a segmentation folder per count and build its mask store; return (folder, store)."""
    import ray

    from precompute import job
    from precompute.fields import FieldSpec
    from precompute.runtime.raylocal import start_local_ray
    from precompute.spec import BuildSpec

    mask = FieldSpec("mask", "mask", {"classes": 4})
    spec = BuildSpec(size=store_size, fields=(FieldSpec("image", "image", {}), mask))
    local = None if ray.is_initialized() else start_local_ray()
    out = []
    try:
        for n in counts:
            src = make_segmentation(root / f"seg{n}", n, size=IMAGE_SIDES, seed=SEED)
            job.build(str(src), str(root / f"seg{n}.zarr"), spec, progress=False)
            out.append((src, root / f"seg{n}.zarr"))
    finally:
        if local is not None:
            local.stop()
    return out


def classic_epochs(
    folder: Path, size: int, batch: int
) -> tuple[Callable[[int], Iterable[int]], Callable[[], None]]:
    """The DataLoader + 2 Pillow workers baseline; returns (epoch fn, close fn)."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        PillowPairs(folder, size),
        batch_size=batch,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        prefetch_factor=2,
        drop_last=True,
        generator=torch.Generator().manual_seed(SEED),
    )

    def epoch(e: int) -> Iterable[int]:
        return (_ready(images, masks) for images, masks in loader)

    def close() -> None:
        it = getattr(loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()

    return epoch, close


def _ready(images: torch.Tensor, masks: torch.Tensor) -> int:
    """The batch size, after checking the batch is training-ready (float image, integer mask)."""
    if not images.is_floating_point() or masks.is_floating_point():
        raise TypeError(f"not training-ready: image {images.dtype}, mask {masks.dtype}")
    return len(images)


def store_epochs(store: Path, size: int, batch: int) -> Callable[[int], Iterable[int]]:
    """StoreLoader epochs with ``TrainAugment`` (crop + flip, normalised float32) on the CPU."""
    from loaders import StoreLoader
    from loaders.augment import TrainAugment

    augment = TrainAugment(size=(size, size))
    loader = StoreLoader(store, batch, device="cpu", seed=SEED, augment=augment, drop_last=True)

    def epoch(e: int) -> Iterable[int]:
        loader.set_epoch(e)
        return (_ready(b["image"], b["mask"]) for b in loader)

    return epoch


def stream_epoch(store: str, size: str, batch: str) -> dict[str, float]:
    """(In a fresh process, :class:`~benchmarks.runner.Command`) one StoreLoader epoch."""
    epoch = store_epochs(Path(store), int(size), int(batch))
    return {"samples": float(sum(epoch(0)))}


def rss_rows(stores: list[tuple[int, Path]], size: int, batch: int) -> list[Command]:
    """A fresh-process epoch over each store: its peak RSS."""
    target = "benchmarks.suite.fields:stream_epoch"
    return [
        Command(f"StoreLoader epoch over {n} samples", target, (str(s), str(size), str(batch)))
        for n, s in stores
    ]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=192, help="samples of the timed dataset")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=160, help="output side of the crop")
    p.add_argument("--store-size", type=int, default=192)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rss-factor", type=int, default=4, help="size of the larger RSS dataset")
    add_json_argument(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison; print the table, the ratio and the peak RSS per dataset size."""
    from benchmarks.environment import environment

    a = _args(argv)
    env = environment()
    with Bench("fields", a.json) as bench, tempfile.TemporaryDirectory() as tmp:
        bench.note(json.dumps({k: env[k] for k in ("cpu", "cores_usable", "memory_gib")}))
        t0 = time.perf_counter()
        counts = [a.images, a.images * a.rss_factor]
        (folder, store), (_, big) = build_stores(Path(tmp), counts, a.store_size)
        bench.note(
            f"setup: {counts} PNG pairs ({IMAGE_SIDES[0]}-{IMAGE_SIDES[1]} px, 4 classes) and "
            f"their mask stores at {a.store_size}px in {time.perf_counter() - t0:.0f}s; "
            f"batch {a.batch}, output {a.size}px"
        )
        classic, close = classic_epochs(folder, a.size, a.batch)
        stored = store_epochs(store, a.size, a.batch)
        rows = [
            Row(CLASSIC, lambda run: sum(classic(run.index)), clock="tree"),
            Row(STORE, lambda run: sum(stored(run.index))),
        ]
        lines = [ratio(f"ratio {STORE} vs classic:", STORE, CLASSIC)]
        try:
            bench.measure("segmentation batches", rows, runs=a.runs, lines=lines)
        finally:
            close()
        small, large = rss_rows(list(zip(counts, (store, big), strict=True)), a.size, a.batch)
        rss = Line(
            f"peak RSS ratio {counts[1]} / {counts[0]} samples:",
            lambda r: r[large.name].median("peak_rss_mib") / r[small.name].median("peak_rss_mib"),
        )
        bench.measure("peak RSS of a fresh process", [small, large], runs=1, warmup=0, lines=[rss])


if __name__ == "__main__":
    main()
