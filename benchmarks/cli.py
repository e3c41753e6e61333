"""The ``bench`` click group: ``run`` (compare strategies, write a report) and ``doctor``.

Run as ``python -m benchmarks run ...`` or, mounted by the precompute CLI, ``precompute bench``.
Both commands take ``--data SRC`` and every option of ``precompute build`` that says what the
source is and how to store it (``--mask-classes``, ``--clip-seconds``, ``--features``,
``--columns``, ``--images``, ``--labels``, ``--patch``, ``--fields``, ``--spec``, ``--mode``,
``--runner``, ...): they are that command's own options, so a source ``precompute build``
takes is one the benchmark takes, listed and stored with the same spec.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import click

from benchmarks.errors import BenchmarkError

__all__ = ["bench", "main"]

# precompute build's parameters the bench commands do not take from it: their own, or meaningless
OWN = frozenset({"src", "out", "size", "seed", "quiet", "replace"})  # replace: of --out
HOW = ("runner", "ray_address", "content_hash")  # how the store is built, not what it holds


def _fail(exc: Exception) -> None:
    raise click.ClickException(str(exc)) from exc


def build_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``precompute build``'s source and spec options (but :data:`OWN`) to ``command``."""
    from precompute.cli import build

    params = getattr(command, "__click_params__", [])
    for param in reversed(build.params):  # click lists the params appended first last
        if param.name not in OWN:
            params.append(copy.copy(param))
    command.__click_params__ = params  # type: ignore[attr-defined]
    return command


def size_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``precompute build``'s own ``--size`` (its parser: ``S`` or ``WxH``), with our help.

    The bench commands take every size the build takes, checked by the same callback, so a
    frame a store was built at (``--size 256x192``) is one ``run`` and ``doctor`` take.
    """
    from precompute.cli import build

    param = copy.copy(next(p for p in build.params if p.name == "size"))
    param.help = SIZE_HELP
    params = getattr(command, "__click_params__", [])
    params.append(param)
    command.__click_params__ = params  # type: ignore[attr-defined]
    return command


def _spec(data: str, size: int | str | None, seed: int, options: dict[str, Any]) -> Any:
    """The build spec of ``data``, as ``precompute build`` makes it from the same flags."""
    from precompute.cli import spec_from_options

    spec_file = options.pop("spec_file", None)
    if size is None and options.get("patch") is None and spec_file is None:
        size = 64  # a scene's --patch P is its size; a spec file may set its own
    flags = {**options, "size": size, "seed": seed}
    return spec_from_options(spec_file, flags, data)


@click.group(name="bench")
def bench() -> None:
    """Compare data-loading strategies on your data, and check this machine."""


SIZE_HELP = (
    "Output crop and stored side S, or a frame WIDTHxHEIGHT (e.g. 256x192), as precompute "
    "build takes it [default: 64; a scene's --patch]."
)
TORCH_THREADS_HELP = (
    "torch intra-op threads of the training thread [default: the usable cores less "
    "--workers, at least 1: a pool beside loaders that take every core stalls on small ops]."
)


@bench.command("run")
@click.option("--data", required=True, help="The source, as precompute build takes it.")
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
@size_option
@click.option(
    "--consumer",
    default="none",
    show_default=True,
    help="none | fixed:<ms> | model (a small net of the data's kind).",
)
@click.option(
    "--strategies",
    default="workers,precompute,precompute-dali,gpu-decode,tf-native,tf-store,memmap",
    show_default=True,
    help="Comma-separated strategy names (one that cannot take the data says why).",
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
@click.option(
    "--mixup",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 100.0),
    help="Mixup's Beta alpha (0: off): every strategy mixes (class labels: images, audio).",
)
@click.option("--torch-threads", default=None, type=click.IntRange(min=1), help=TORCH_THREADS_HELP)
@build_options
def run(
    data: str,
    store: str | None,
    out: str,
    epochs: int,
    batch_size: int,
    workers: int | None,
    size: int | str | None,
    consumer: str,
    strategies: str,
    device: str | None,
    warmup_steps: int,
    max_steps: int | None,
    seed: int,
    mixup: float,
    torch_threads: int | None,
    **options: Any,
) -> None:
    """Run the strategies one after another and write report.md/json/html and plots to OUT."""
    from benchmarks.environment import usable_cores
    from benchmarks.harness.loop import RunOptions
    from benchmarks.harness.report import markdown_table
    from benchmarks.harness.report_tables import ratio_lines
    from benchmarks.harness.run import BuildOptions, run_benchmark
    from precompute.errors import PrecomputeError

    names = [s.strip() for s in strategies.split(",") if s.strip()]
    opts = RunOptions(epochs=epochs, warmup_steps=warmup_steps, max_steps=max_steps)
    how = BuildOptions(**{k: options.pop(k) for k in HOW})
    spec = _spec(data, size, seed, options)
    try:
        report, paths = run_benchmark(
            data,
            out,
            store=store,
            strategies=names,
            epochs=epochs,
            batch_size=batch_size,
            workers=usable_cores() if workers is None else workers,
            consumer=consumer,
            device=device,
            seed=seed,
            options=opts,
            spec=spec,
            build=how,
            mixup=mixup,
            torch_threads=torch_threads,
        )
    except (BenchmarkError, PrecomputeError) as exc:
        _fail(exc)
    click.echo(f"{report['workload']['task']}: {report['workload']['batch']}")
    if report["workload"].get("left_out"):
        click.echo(f"WARNING: {report['workload']['left_out']}")
    click.echo(markdown_table(report["strategies"]))
    click.echo("\n".join(ratio_lines(report)))
    if (report.get("build") or {}).get("warning"):
        click.echo(f"Warning: {report['build']['warning']}")
    for name, v in report["break_even"].items():
        click.echo(f"{name} pays for itself after: {v['detail']}")
    click.echo(f"report: {paths['md']} (and {paths['html'].name}, the plots inside it)")
    if not any(s.get("status") == "ok" for s in report["strategies"]):
        click.echo("error: no strategy was measured (the report says why each was not)", err=True)
        raise click.exceptions.Exit(1)


@bench.command("doctor")
@click.option("--data", required=True, help="The source, as precompute build takes it.")
@click.option("--store", default=None, help="A store to measure read speed on.")
@size_option
@click.option("--max-files", default=200, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(min=0),
    help="Workers/threads the strategies get, as for run [default: usable cores].",
)
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--torch-threads", default=None, type=click.IntRange(min=1), help=TORCH_THREADS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@build_options
def doctor_cmd(
    data: str,
    store: str | None,
    size: int | str | None,
    max_files: int,
    workers: int | None,
    batch_size: int,
    seed: int,
    torch_threads: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Check cores, GPU, decode and read speed, and the feed rate each strategy could reach."""
    from benchmarks.harness.doctor import doctor, format_doctor
    from precompute.errors import PrecomputeError

    for k in HOW:
        options.pop(k)
    spec = _spec(data, size, seed, options)
    try:
        res = doctor(
            data,
            store=store,
            max_files=max_files,
            workers=workers,
            batch_size=batch_size,
            spec=spec,
            torch_threads=torch_threads,
        )
    except (BenchmarkError, PrecomputeError, OSError) as exc:
        _fail(exc)
    click.echo(json.dumps(res, indent=1, default=str) if as_json else format_doctor(res))


def main() -> None:
    """Entry point of ``python -m benchmarks``."""
    bench(prog_name="python -m benchmarks")
