"""``python -m benchmarks.gpucheck make-data | slim-wheel | run``: scripts/gpu-check.sh's steps."""

from __future__ import annotations

from pathlib import Path

import click

from benchmarks.gpucheck.check import FEEDS, CheckConfig, run_check
from benchmarks.gpucheck.consumers import MODELS
from benchmarks.gpucheck.data import make_photos
from benchmarks.gpucheck.report import summary_lines, write
from benchmarks.gpucheck.wheels import slim_wheel


@click.group()
def main() -> None:
    """The GPU check kit (docs/gpu.md)."""


@main.command("make-data")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--images", default=1792, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
def make_data(out: Path, images: int, seed: int) -> None:
    """Write the raw dataset: photo-like JPEGs of 256-320 px in 8 class folders."""
    size = make_photos(out, images, seed=seed)
    click.echo(f"gpu-check: {images} JPEGs, {size / 2**20:.1f} MiB in {out}")


@main.command("slim-wheel")
@click.argument("wheels", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--python", "python", default="3.12", show_default=True)
def slim(wheels: tuple[Path, ...], python: str) -> None:
    """Cut WHEELS down to one CPython's modules and the JPEG decoders, in place."""
    for wheel in wheels:
        before, after = slim_wheel(wheel, python)
        click.echo(f"gpu-check: {wheel.name}: {before >> 10} KiB -> {after >> 10} KiB")


@main.command("run")
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--cpu", is_flag=True, help="Skip the CUDA steps; run the rest on the CPU.")
@click.option("--size", default=224, show_default=True, type=click.IntRange(min=8))
@click.option("--stored", default=256, show_default=True, type=click.IntRange(min=8))
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1))
@click.option("--workers", default=16, show_default=True, type=click.IntRange(min=0))
@click.option("--epochs", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--train-epochs", default=12, show_default=True, type=click.IntRange(min=1))
@click.option("--model", default="auto", show_default=True, type=click.Choice(MODELS))
@click.option("--budget-s", default=360.0, show_default=True, type=click.FloatRange(min=1))
@click.option("--no-tests", is_flag=True, help="Skip the gpu tests.")
@click.option("--no-decode", is_flag=True, help="Skip the decode row (a JPEG store).")
@click.option("--feeds", default=",".join(FEEDS), show_default=True)
def run(
    data: str,
    out: Path,
    cpu: bool,
    size: int,
    stored: int,
    batch_size: int,
    workers: int,
    epochs: int,
    train_epochs: int,
    model: str,
    budget_s: float,
    no_tests: bool,
    no_decode: bool,
    feeds: str,
) -> None:
    """Build, test, measure; write report.md, report.json, pytest.txt and plots into --out."""
    cfg = CheckConfig(
        data,
        out,
        cpu=cpu,
        size=size,
        stored=stored,
        batch_size=batch_size,
        workers=workers,
        epochs=epochs,
        train_epochs=train_epochs,
        model=model,
        budget_s=budget_s,
        tests=not no_tests,
        feeds=tuple(f for f in feeds.split(",") if f),
        decode=not no_decode,
    )
    report = run_check(cfg)
    paths = write(report, out)
    click.echo("\n".join(["gpu-check summary:", *summary_lines(report)]))
    click.echo(f"gpu-check: wrote {', '.join(sorted(p.name for p in out.iterdir()))} in {out}")
    if paths["md"].stat().st_size == 0:
        raise click.ClickException("report.md is empty")


if __name__ == "__main__":
    main()
