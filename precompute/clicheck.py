"""``precompute check SRC``: every bad input of a source at once, and no store written.

The command takes the build's own options (the same source and spec: ``precompute build``'s
parameters less ``--out``, ``--replace`` and ``--content-hash``), so a check and a build of one
command line agree; :func:`precompute.job.check` does the work
(:mod:`precompute.pipeline.check`). Imported when the command is used (``precompute.cli``'s
lazy commands).
"""

from __future__ import annotations

import json
from typing import Any

import click

from precompute.cli import CHECK_HELP, UsageFailure, _show_ray_choice, build, spec_from_options
from precompute.errors import SourceError

__all__ = ["check"]


def _check(
    src: str,
    spec_file: str | None,
    ray_address: str | None,
    runner: str,
    quiet: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Find every bad input of SRC at once (as a build of the same options would), write nothing.

    Lists the source and reads, decodes and checks every sample as the build does, under
    --on-error skip whatever it says, and prints each bad input with the build's reason
    (BAD KEY: REASON), then one summary line. Exit 0: every input is good; 1: some are bad;
    2: the source or options are refused as a whole.
    """
    from precompute.job import check as run_check

    if runner == "sequential" and ray_address is not None:
        raise UsageFailure("--ray-address and --runner sequential exclude each other")
    if not quiet and runner == "ray":
        _show_ray_choice()
    spec = spec_from_options(spec_file, options, src)
    try:
        report = run_check(src, spec, ray_address=ray_address, progress=not quiet, runner=runner)
    except SourceError as exc:
        raise UsageFailure(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for line in report.lines():
            click.echo(line)
    if report.bad:
        raise click.exceptions.Exit(1)


check = click.Command(
    "check",
    callback=_check,
    params=[
        *(p for p in build.params if p.name not in ("out", "replace", "content_hash")),
        click.Option(["--json", "as_json"], is_flag=True, help="Print the report as JSON."),
    ],
    help=_check.__doc__,
    short_help=CHECK_HELP,
)
