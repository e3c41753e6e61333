"""The ``precompute`` command line: build, check, inspect, verify; other packages add theirs.

``demo`` (loaders), ``cache``/``serve`` (service) and ``bench`` (benchmarks) are the
``nostall.commands`` entry points of the distribution, imported only when used.

Usage errors (bad ``--size``/``--mode``, a missing source path, a malformed spec file) print one
line and exit 2; a failed build or a bad store prints one line and exits 1. No tracebacks for
errors a user can cause.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from precompute.clifields import OWN_FLAGS, columns_from_flag, fields_from_flags, kind_flags
from precompute.clilazy import LazyGroup
from precompute.errors import (
    ClassListWarning,
    PrecomputeError,
    SourceError,
    SpecError,
    SplitWarning,
    StoreError,
    Terminated,
)
from precompute.format.codecs import parse_codec_flag
from precompute.sources.classlist import classes_flag
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
    "max_bytes",
)


class UsageFailure(click.UsageError):
    """A usage error (exit 2) reported on one line."""


def _yaml_reason(exc: Exception) -> str:
    """One line: where in the file, and the problem (PyYAML's own text spans lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def _load_spec_file(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    import yaml  # a dependency of ray

    from precompute.sources.inputs import read_input

    try:
        data = yaml.safe_load(read_input(path, max_bytes=1 << 20).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageFailure(f"--spec {path}: cannot read spec file: {exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageFailure(f"--spec {path}: cannot read spec file: {_yaml_reason(exc)}") from exc
    if not isinstance(data, dict):
        raise UsageFailure(f"--spec {path}: a spec file must hold a mapping")
    return data


def spec_from_options(
    spec_file: str | None, options: dict[str, Any], src: str | None = None
) -> BuildSpec:
    """Merge a YAML spec file with the flags given (flags win) into a :class:`BuildSpec`.

    With ``src``, the field flags (:mod:`precompute.clifields`) set the spec's ``fields``.
    """
    data = _load_spec_file(spec_file)
    where = f"--spec {spec_file} (and flags): " if spec_file else ""
    columns_flag = options.pop("columns", None)
    classes = (options.pop("classes", None), options.pop("classes_from", None))
    codec_flag = options.pop("codec", None)
    name, args, at = (options.pop(k, None) for k in ("transform", "transform_args", "transform_at"))
    try:
        if (name, args, at) != (None, None, None):  # --transform: over the spec file's
            data["transform"] = transform_from_flags(name, args, at, data.get("transform"))
        if columns_flag is not None:
            data["columns"] = columns_from_flag(columns_flag)
        if codec_flag is not None:  # over the spec file's codecs, field by field
            given = data.get("codecs")
            data["codecs"] = {
                **(given if isinstance(given, dict) else {}),
                **parse_codec_flag(codec_flag),
            }
        if classes != (None, None):  # --classes, --classes-from: a fixed class list
            data["classes"] = classes_flag(*classes)
        fields = None
        if src is not None:
            fill = data.get("fill", 0)
            given = data.get("columns")  # --columns, else the spec file's
            columns = given if isinstance(given, dict) else None
            fields = fields_from_flags(src, options, fill if isinstance(fill, int) else 0, columns)
    except (SpecError, SourceError) as exc:
        raise UsageFailure(str(exc)) from exc
    data.update({k: v for k, v in options.items() if v is not None})
    if fields is not None:
        data["fields"] = fields
    try:
        return BuildSpec.from_dict(data)
    except SpecError as exc:
        raise UsageFailure(f"{where}{exc}") from exc


def _size_flag(value: str | None) -> int | str | None:
    """``--size S`` or ``--size WxH``, checked as the spec checks it (naming the flag)."""
    if value is None:
        return None
    from precompute.checks import check_size

    text = value.strip()
    return check_size("--size", int(text) if text.isdigit() else text, 1, 8192, click.BadParameter)


def transform_from_flags(
    name: str | None, args: str | None, at: str | None, spec_file: Any = None
) -> dict[str, Any]:
    """``--transform NAME --transform-args JSON --transform-at AT`` as the spec's ``transform``.

    ``--transform-args`` or ``--transform-at`` alone change the spec file's transform.

    Raises:
        SpecError: Arguments that are not a JSON object, or no transform to apply them to.
    """
    base = dict(spec_file) if isinstance(spec_file, dict) else {}
    if isinstance(spec_file, str):
        base = {"name": spec_file}
    if name is not None:
        base = {"name": name}
    if "name" not in base:
        raise SpecError("--transform-args and --transform-at need --transform pkg.module:function")
    if args is not None:
        try:
            base["args"] = json.loads(args)
        except ValueError as exc:
            raise SpecError(f"--transform-args: not JSON ({exc}): {args[:60]!r}") from None
    if at is not None:
        base["at"] = at
    base.pop("fingerprint", None)  # the code as it is now
    return base


def _kind_options(command: Any) -> Any:
    """Add the flags every registered kind declares (``Kind.flags``) to ``command``."""
    for param, (kind, flag) in reversed(kind_flags().items()):
        name = f"--{param.replace('_', '-')}"
        command = click.option(name, param, type=flag.convert, help=flag.help)(command)
        command.__click_params__[-1].nostall_kind = kind  # the option just added
    return command


def _own_options_first(command: Any) -> Any:
    """Leave out a kind's flag named as one of ``command``'s own options, saying so.

    Applied above every option of the build: a plugin's ``--size`` would otherwise be a second
    ``--size``, and the build's size the plugin's option.
    """
    params = command.__click_params__
    own = {p.name for p in params if not hasattr(p, "nostall_kind")}
    for p in [p for p in params if getattr(p, "nostall_kind", None) and p.name in own]:
        params.remove(p)
        warnings.warn(
            f"the flag {p.opts[0]} of kind {p.nostall_kind!r} is an option of precompute build "
            "itself: left out (set the kind's option with --fields)",
            RuntimeWarning,
            2,
        )
    OWN_FLAGS.update(own)
    return command


@click.group(
    cls=LazyGroup,
    entry_point_group="nostall.commands",  # cache, serve (service), bench (benchmarks), demo
)
def cli() -> None:
    """Precompute a raw image dataset once into a sharded Zarr store, then stream it."""


@cli.command()
@_own_options_first
@click.argument("src")
@click.option("--out", "out", required=True, help="Output store folder or s3:// URL.")
@click.option(
    "--size",
    callback=lambda ctx, param, value: _size_flag(value),
    help="Stored side S, or a frame WIDTHxHEIGHT (e.g. 512x384); default 224.",
)
@click.option("--mode", help="letterbox | center-crop | squash (default center-crop).")
@click.option("--seed", type=int, help="Seed of the sample order and augmentation.")
@click.option("--shard-samples", type=int, help="Samples per shard file (default 256).")
@click.option("--chunk-samples", type=int, help="Samples per inner chunk (default 32).")
@click.option("--variants", type=int, help="K offline-augmented copies per sample.")
@click.option("--on-error", help="raise (default) | skip: what to do with a bad input.")
@click.option("--max-pixels", type=int, help="Refuse inputs whose header claims more pixels.")
@click.option("--max-bytes", type=int, help="Refuse inputs larger than this (default 256 MiB).")
@click.option(
    "--columns",
    help="Parquet/WebDataset SRC: FIELD=COLUMN,... the column or member suffix each field "
    "reads (image=img,label=fine_label; image=jpg,label=cls).",
)
@click.option(
    "--classes",
    help="A fixed class list, a,b,c or @FILE (one name per line): a label is the index of its "
    "name here, in every split (docs/manifests.md).",
)
@click.option(
    "--classes-from",
    metavar="STORE",
    help="The class list of STORE (another split's store): --classes with its names.",
)
@click.option(
    "--codec",
    "codec",
    help="FIELD=CODEC,... how each field's chunks are stored (default raw): zstd[:LEVEL] "
    "(lossless, any field), jpeg[:QUALITY[:420|422|444]] (lossy, images); e.g. "
    "image=jpeg:90,mask=zstd:3 (docs/FORMAT.md, 'Codecs').",
)
@click.option(
    "--transform",
    metavar="PKG.MODULE:FUNCTION",
    help="Your preprocessing, run on each sample in the build: fn(sample, key, **args) -> "
    "sample (docs/transforms.md). The store's identity holds its fingerprint: its module's "
    "code and your modules it imports, and its args (or fn.version instead of the code). "
    "Files it reads (a JSON lookup table, weights) are NOT covered: when one changes, change "
    "fn.version (or an arg) to get a new store.",
)
@click.option("--transform-args", metavar="JSON", help="Keyword arguments of --transform.")
@click.option(
    "--transform-at",
    type=click.Choice(["stored", "decoded"]),
    help="stored (default): after the resize, on the values as stored; decoded: before it.",
)
@_kind_options
@click.option(
    "--fields",
    help="JSON list (or a JSON/YAML file) of {name, kind, options}: every field, explicit.",
)
@click.option(
    "--ray-address",
    help="Ray to join (ADDR or auto), or local: the build's own. Default: RAY_ADDRESS, else a "
    "`ray start` Ray of this machine's CPUs, else the build's own (docs/scale.md).",
)
@click.option(
    "--runner",
    type=click.Choice(["auto", "ray", "sequential"]),
    default="auto",
    show_default=True,
    help="auto: Ray where one is named (--ray-address, RAY_ADDRESS) or the source's work is "
    "more than starting Ray costs, else in this process on every CPU; ray: always; "
    "sequential: every shard in this process, one after another, without Ray (debugging, "
    "machines without Ray). The same store; the summary says which ran and why.",
)
@click.option("--spec", "spec_file", help="YAML build spec; flags override its values.")
@click.option("--content-hash", is_flag=True, help="Fingerprint the source by content.")
@click.option("--quiet", is_flag=True, help="No progress bar (the summary and notes still print).")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a nostall store of another source or spec at --out (a half-built one whose "
    "inputs were fixed since); never a folder that is not a store.",
)
def build(
    src: str,
    out: str,
    spec_file: str | None,
    ray_address: str | None,
    runner: str,
    content_hash: bool,
    quiet: bool,
    replace: bool,
    **options: Any,
) -> None:
    """Build (or resume) the store of SRC at --out.

    SRC: class folders or a path,label CSV/JSONL manifest (a v1 store of image + label); a
    segmentation folder (SRC/images/ + SRC/masks/, paired by name: give --mask-classes), or a
    CSV/JSONL manifest whose columns name fields (image, mask, keypoints, label, labels,
    boxes): a store with those fields (format v2); a COCO instances .json file (--images DIR
    if its file_names are not beside it): image + boxes (docs/boxes.md); class folders or a
    path,label[,start,end] manifest of audio files (WAV/FLAC/OGG/MP3; give --clip-seconds):
    fields audio + label (docs/audio.md).
    Class folders or a path,label manifest of .npy, .npz
    or .mat files: a store of image (kind array, dtype and values kept) + label; a scene
    file with --labels GT --patch P: one patch per labelled pixel (docs/arrays.md). A .parquet
    file or a folder of them (Hugging Face datasets), or WebDataset .tar shards: the fields
    their columns or members hold (--columns picks them; docs/sources.md).
    """
    from precompute.job import build as run_build
    from precompute.pipeline.outputs import check_output

    if runner == "sequential" and ray_address is not None:
        raise UsageFailure("--ray-address and --runner sequential exclude each other")
    if runner != "sequential":
        _show_ray_choice()

    spec = spec_from_options(spec_file, options, src)
    try:
        check_output(out, src)
    except StoreError as exc:
        raise UsageFailure(str(exc)) from exc
    try:
        with _loud_warnings():
            attrs = run_build(
                src,
                out,
                spec,
                ray_address=ray_address,
                progress=not quiet,
                content_hash=content_hash,
                runner=runner,
                summary=True,
                replace=replace,
            )
    except SourceError as exc:
        raise UsageFailure(str(exc)) from exc
    report = attrs["report"]
    if report["num_samples"] and not report["num_valid"]:  # a complete store of nothing
        click.echo(
            f"precompute: error: {out}: no input could be used: all {report['num_samples']} "
            f"were skipped (precompute inspect {out} says why)",
            err=True,
        )
        raise click.exceptions.Exit(1)


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
    (BAD KEY: REASON), the notes the build's summary would print about inputs it keeps
    (note: ...: 12-bit grey, clips padded, clipped or cut short), then one summary line.
    Exit 0: no input is bad (notes or not); 1: some are bad; 2: the source or options are
    refused as a whole.
    """
    from precompute.job import check as run_check  # lazy: imports Ray

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


# the build's own options (the same source and spec), less those of its output
cli.add_command(
    click.Command(
        "check",
        callback=_check,
        params=[
            *(p for p in build.params if p.name not in ("out", "replace", "content_hash")),
            click.Option(["--json", "as_json"], is_flag=True, help="Print the report as JSON."),
        ],
        help=_check.__doc__,
        short_help="Find every bad input of SRC at once; write nothing.",
    )
)


@contextmanager
def _loud_warnings() -> Iterator[None]:
    """Our warnings as one line each on stderr: labels that shift, a split stratified in vain."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", ClassListWarning)
        warnings.simplefilter("always", SplitWarning)
        default = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
            if issubclass(category, (ClassListWarning, SplitWarning)):
                click.echo(f"precompute: WARNING: {message}", err=True)
            else:
                default(message, category, *args, **kw)

        warnings.showwarning = show
        yield


def _show_ray_choice() -> None:
    """Print on stderr which running Ray the build joins or leaves alone (runtime.raysession)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("precompute: %(message)s"))
    choice = logging.getLogger("precompute.runtime.raysession")
    choice.addHandler(handler)
    choice.setLevel(logging.INFO)


@cli.command()
@click.argument("store")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print every attribute as JSON (split, class counts, bytes per sample; of an "
    "incomplete store what is written so far and why its last build stopped).",
)
def inspect(store: str, as_json: bool) -> None:
    """Summarise STORE (layout, spec, build report, split, class counts, skipped inputs)."""
    from precompute.format.summary import store_attributes, store_summary

    if as_json:
        click.echo(json.dumps(store_attributes(store), indent=2, sort_keys=True))
    else:
        click.echo(store_summary(store))


@cli.command()
@click.argument("store")
@click.option(
    "--fractions", required=True, help="Parts and their shares, e.g. train=0.8,val=0.1,test=0.1."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the dealing.")
@click.option("--stratify", help="A field whose classes every part keeps in proportion.")
@click.option("--group-by", help="Key pattern: its first group keeps samples together.")
@click.option("--group-column", help="MANIFEST:COLUMN whose cells keep samples together.")
def split(
    store: str,
    fractions: str,
    seed: int,
    stratify: str | None,
    group_by: str | None,
    group_column: str | None,
) -> None:
    """Deal STORE's samples into named parts and record them with it (no data is copied).

    A loader then serves one part: StoreLoader(STORE, ..., split="val").
    """
    from precompute.splits.assign import Split
    from precompute.splits.command import parse_fractions, record_split
    from precompute.splits.record import split_lines

    if group_by and group_column:
        raise click.UsageError("give --group-by or --group-column, not both")
    rule = Split(parse_fractions(fractions), seed, stratify, group_by)
    with _loud_warnings():  # stratified to no effect: every group in one stratum
        recorded = record_split(store, rule, group_column)
    click.echo("\n".join(split_lines(recorded)))


@cli.command()
@click.argument("store")
def verify(store: str) -> None:
    """Read every chunk of STORE, check completeness and checksums; exit 1 on a problem."""
    from precompute.format.verify import verify_store

    problems = verify_store(store)
    for problem in problems:
        click.echo(f"BAD {problem}", err=True)
    if problems:
        raise click.exceptions.Exit(1)
    click.echo(f"OK {store}")


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM: unwind as Ctrl-C does (the build's Ray stops, the store stays resumable)."""
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI with one-line errors and exit codes.

    SIGTERM (a batch scheduler's stop) ends a build as Ctrl-C does, with exit code 143.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        code = cli.main(args=argv, prog_name="precompute", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("precompute: aborted", err=True)
        sys.exit(130)
    except Terminated:
        click.echo("precompute: aborted (SIGTERM)", err=True)
        sys.exit(128 + signal.SIGTERM)
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
