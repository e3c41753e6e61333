"""The ``precompute`` command line: build, inspect, verify, demo (+ lazily loaded cache/bench).

Usage errors (bad ``--size``/``--mode``, a missing source path, a malformed spec file) print one
line and exit 2; a failed build or a bad store prints one line and exits 1. No tracebacks for
errors a user can cause.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from precompute.clilazy import LazyGroup
from precompute.errors import PrecomputeError, SourceError, SpecError, StoreError
from precompute.spec import BuildSpec

__all__ = ["cli", "main"]

_SPEC_FLAGS = (
    "size",
    "mode",
    "seed",
    "shard_samples",
    "chunk_samples",
    "variants",
    "on_error",
    "max_pixels",
)


class UsageFailure(click.UsageError):
    """A usage error (exit 2) reported on one line."""


def _load_spec_file(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    import yaml  # a dependency of ray

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageFailure(f"--spec {path}: cannot read spec file: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageFailure(f"--spec {path}: a spec file must hold a mapping")
    return data


def spec_from_options(spec_file: str | None, options: dict[str, Any]) -> BuildSpec:
    """Merge a YAML spec file with the flags given (flags win) into a :class:`BuildSpec`."""
    data = _load_spec_file(spec_file)
    data.update({k: v for k, v in options.items() if v is not None})
    try:
        return BuildSpec.from_dict(data)
    except SpecError as exc:
        raise UsageFailure(str(exc)) from exc


@click.group(
    cls=LazyGroup,
    lazy_commands={
        "cache": ("service.cli", "cache", "Manage the store cache (service)."),
        "serve": ("service.cli", "serve", "Run the cache service's HTTP API."),
        "bench": ("benchmarks.cli", "bench", "Run the benchmark suite."),
    },
)
def cli() -> None:
    """Precompute a raw image dataset once into a sharded Zarr store, then stream it."""


@cli.command()
@click.argument("src")
@click.option("--out", "out", required=True, help="Output store folder or s3:// URL.")
@click.option("--size", type=int, help="Stored side length S (default 224).")
@click.option("--mode", help="letterbox | center-crop | squash (default center-crop).")
@click.option("--seed", type=int, help="Seed of the sample order and augmentation.")
@click.option("--shard-samples", type=int, help="Samples per shard file (default 256).")
@click.option("--chunk-samples", type=int, help="Samples per inner chunk (default 32).")
@click.option("--variants", type=int, help="K offline-augmented copies per sample.")
@click.option("--on-error", help="raise (default) | skip: what to do with a bad input.")
@click.option("--max-pixels", type=int, help="Refuse inputs whose header claims more pixels.")
@click.option("--ray-address", help="Ray cluster address (default: start local Ray).")
@click.option("--spec", "spec_file", help="YAML build spec; flags override its values.")
@click.option("--content-hash", is_flag=True, help="Fingerprint the source by content.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def build(
    src: str,
    out: str,
    spec_file: str | None,
    ray_address: str | None,
    content_hash: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Build (or resume) the store of SRC (class folders or a CSV/JSONL manifest) at --out."""
    from precompute.job import build as run_build

    spec = spec_from_options(spec_file, options)
    if not out.startswith("s3://") and (
        "://" in out or (Path(out).exists() and not Path(out).is_dir())
    ):
        raise UsageFailure(
            f"--out {out}: must be a local folder or an s3:// URL (new, or a store to resume)"
        )
    try:
        run_build(
            src, out, spec, ray_address=ray_address, progress=not quiet, content_hash=content_hash
        )
    except SourceError as exc:
        raise UsageFailure(str(exc)) from exc


@cli.command()
@click.argument("store")
@click.option("--json", "as_json", is_flag=True, help="Print the store attributes as JSON.")
def inspect(store: str, as_json: bool) -> None:
    """Summarise STORE (layout, spec, build report, skipped inputs)."""
    from precompute.format import open_store_info
    from precompute.summary import store_summary

    if as_json:
        info = open_store_info(store, require_complete=False)
        click.echo(json.dumps(dict(info.attrs), indent=2, sort_keys=True))
    else:
        click.echo(store_summary(store))


@cli.command()
@click.argument("store")
def verify(store: str) -> None:
    """Read every chunk of STORE, check completeness and checksums; exit 1 on a problem."""
    from precompute.verify import verify_store

    problems = verify_store(store)
    for problem in problems:
        click.echo(f"BAD {problem}", err=True)
    if problems:
        raise click.exceptions.Exit(1)
    click.echo(f"OK {store}")


@cli.command()
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
    from precompute.job import build as run_build
    from precompute.sample import make_sample_dataset
    from precompute.summary import store_summary

    spec = spec_from_options(None, {"size": size, "mode": "letterbox", "on_error": "skip"})
    src = Path(out) / "images"
    if not src.is_dir():
        click.echo(f"writing {images} sample images to {src}", err=True)
        make_sample_dataset(src, num_images=images)
    run_build(str(src), str(Path(out) / "store"), spec)
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
    loader = StoreLoader(store, 64, device=device, drop_last=False,
                         augment=TrainAugment(size=(crop, crop)))
    start, n, shape = time.perf_counter(), 0, "no batch"
    for batch in loader:
        n += len(batch["index"])
        shape = f"{tuple(batch['image'].shape)} {batch['image'].dtype}"
    rate = n / max(time.perf_counter() - start, 1e-9)
    return (f"loader     1 epoch on {device}: {n} samples, batches of {shape}, "
            f"{rate:,.0f} samples/s (StoreLoader + TrainAugment)")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI with one-line errors and exit codes."""
    try:
        code = cli.main(args=argv, prog_name="precompute", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("precompute: aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as exc:
        click.echo(f"precompute: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except (SpecError, SourceError) as exc:
        click.echo(f"precompute: error: {exc}", err=True)
        sys.exit(2)
    except (PrecomputeError, StoreError) as exc:
        click.echo(f"precompute: error: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:  # permissions, full disk, ...: one line, not a traceback
        click.echo(f"precompute: error: {exc}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"precompute: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
