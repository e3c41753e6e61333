"""``precompute demo``: a sample dataset, a store built from it on local Ray, one epoch streamed.

A ``nostall.commands`` entry point: the precompute CLI mounts it without importing loaders.
"""

from __future__ import annotations

from pathlib import Path

import click

from precompute.cli import spec_from_options

__all__ = ["demo"]


@click.command()
@click.option(
    "--out",
    "out",
    default="nostall-demo",
    show_default=True,
    help="Folder for the sample images and the store.",
)
@click.option("--images", default=300, show_default=True, help="Number of sample images.")
@click.option("--size", default=128, show_default=True, help="Stored side length.")
def demo(out: str, images: int, size: int) -> None:
    """Generate a sample dataset, build a store from it on local Ray, print its summary."""
    from precompute.format.summary import store_summary
    from precompute.job import build as run_build
    from precompute.sample import make_sample_dataset

    spec = spec_from_options(None, {"size": size, "mode": "letterbox", "on_error": "skip"})
    src = Path(out) / "images"
    if not src.is_dir():
        click.echo(f"writing {images} sample images to {src}", err=True)
        make_sample_dataset(src, num_images=images)
    run_build(str(src), str(Path(out) / "store"), spec, runner="ray")  # the Ray Data job
    click.echo(store_summary(Path(out) / "store"))
    click.echo(_stream_once(Path(out) / "store", size))


def _stream_once(store: Path, size: int) -> str:
    """Stream one epoch of ``store`` through StoreLoader with augmentation; describe it."""
    import time

    import torch

    from loaders import StoreLoader
    from loaders.augment import TrainAugment

    device = "cuda" if torch.cuda.is_available() else "cpu"
    crop = size * 7 // 8
    loader = StoreLoader(
        store, 64, device=device, drop_last=False, augment=TrainAugment(size=(crop, crop))
    )
    start, n, shape = time.perf_counter(), 0, "no batch"
    for batch in loader:
        n += len(batch["index"])
        shape = f"{tuple(batch['image'].shape)} {batch['image'].dtype}"
    rate = n / max(time.perf_counter() - start, 1e-9)
    return (
        f"loader     1 epoch on {device}: {n} samples, batches of {shape}, "
        f"{rate:,.0f} samples/s (StoreLoader + TrainAugment)"
    )
