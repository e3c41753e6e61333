"""The ``bench`` click group: ``run`` (compare strategies, write a report) and ``doctor``.

Run as ``python -m benchmarks run ...`` or, mounted by the precompute CLI, ``precompute bench``.
"""

from __future__ import annotations

import json

import click

from benchmarks.errors import BenchmarkError

__all__ = ["bench", "main"]


def _fail(exc: Exception) -> None:
    raise click.ClickException(str(exc)) from exc


@click.group(name="bench")
def bench() -> None:
    """Compare data-loading strategies on your data, and check this machine."""


@bench.command("run")
@click.option("--data", required=True, help="Raw dataset: class folders or a CSV/JSONL manifest.")
@click.option("--store", default=None, help="Existing store (else one is built into OUT).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Report folder.")
@click.option(
    "--epochs",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Epochs per strategy; samples/s is the median of the epochs.",
)
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(min=0),
    help="Loader workers/threads [default: usable cores].",
)
@click.option(
    "--size",
    default=64,
    show_default=True,
    type=click.IntRange(min=8),
    help="Output crop size (and stored size of a built store).",
)
@click.option("--consumer", default="none", show_default=True, help="none | fixed:<ms> | model")
@click.option(
    "--strategies",
    default="workers,precompute,precompute-dali,gpu-decode",
    show_default=True,
    help="Comma-separated strategy names.",
)
@click.option("--device", default=None, help="cpu or cuda [default: cuda if available].")
@click.option("--warmup-steps", default=2, show_default=True, type=click.IntRange(min=0))
@click.option(
    "--max-steps",
    default=None,
    type=click.IntRange(min=1),
    help="Stop each epoch after this many steps.",
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
def run(
    data: str,
    store: str | None,
    out: str,
    epochs: int,
    batch_size: int,
    workers: int | None,
    size: int,
    consumer: str,
    strategies: str,
    device: str | None,
    warmup_steps: int,
    max_steps: int | None,
    seed: int,
) -> None:
    """Run the strategies one after another and write report.md/json/html and plots to OUT."""
    from benchmarks.environment import usable_cores
    from benchmarks.harness.loop import RunOptions
    from benchmarks.harness.report import markdown_table
    from benchmarks.harness.run import run_benchmark
    from precompute.errors import PrecomputeError

    names = [s.strip() for s in strategies.split(",") if s.strip()]
    opts = RunOptions(epochs=epochs, warmup_steps=warmup_steps, max_steps=max_steps)
    try:
        report, paths = run_benchmark(
            data,
            out,
            store=store,
            strategies=names,
            epochs=epochs,
            batch_size=batch_size,
            workers=usable_cores() if workers is None else workers,
            size=size,
            consumer=consumer,
            device=device,
            seed=seed,
            options=opts,
        )
    except (BenchmarkError, PrecomputeError) as exc:
        _fail(exc)
    click.echo(markdown_table(report["strategies"]))
    if (report.get("build") or {}).get("warning"):
        click.echo(f"Warning: {report['build']['warning']}")
    for name, v in report["break_even"].items():
        click.echo(f"{name} pays for itself after: {v['detail']}")
    click.echo(f"report: {paths['md']} (and {paths['html'].name}, the plots inside it)")
    if not any(s.get("status") == "ok" for s in report["strategies"]):
        click.echo("error: no strategy was measured (the report says why each was not)", err=True)
        raise click.exceptions.Exit(1)


@bench.command("doctor")
@click.option("--data", required=True, help="Raw dataset to measure decode/read speed on.")
@click.option("--store", default=None, help="A store to measure read speed on.")
@click.option("--size", default=64, show_default=True, type=click.IntRange(min=8))
@click.option("--max-files", default=200, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(min=0),
    help="Workers/threads the strategies get, as for run [default: usable cores].",
)
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def doctor_cmd(
    data: str,
    store: str | None,
    size: int,
    max_files: int,
    workers: int | None,
    batch_size: int,
    as_json: bool,
) -> None:
    """Check cores, GPU, decode and read speed, and the feed rate each strategy could reach."""
    from benchmarks.harness.doctor import doctor, format_doctor
    from precompute.errors import PrecomputeError

    try:
        res = doctor(
            data,
            store=store,
            size=size,
            max_files=max_files,
            workers=workers,
            batch_size=batch_size,
        )
    except (BenchmarkError, PrecomputeError, OSError) as exc:
        _fail(exc)
    click.echo(json.dumps(res, indent=1, default=str) if as_json else format_doctor(res))


def main() -> None:
    """Entry point of ``python -m benchmarks``."""
    bench(prog_name="python -m benchmarks")
