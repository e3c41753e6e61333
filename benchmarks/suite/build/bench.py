"""Benchmark ``precompute build``: throughput vs a bare Pillow pool, and peak RSS vs dataset size.

Run: ``.venv/bin/python -m benchmarks.suite.build [--images 8000] [--size 256] ...``

1. Throughput: the same files, the same cores, the same decode+resize (Pillow open, EXIF
   transpose, convert to RGB, bilinear centre-crop resize to S). The baseline is a
   ``multiprocessing.Pool`` returning the pixels to the parent; the build is ``precompute.build``
   on local Ray (already started: Ray start-up is outside the timed part), writing a store.
   A warm-up run of each, then ``--runs`` alternating runs (:mod:`benchmarks.runner`); ratio =
   build / pool throughput (target >= 0.85) of the medians and of the best runs, plus CPU ms per
   image of each (process trees), which other load on a shared machine disturbs much less than
   wall time.
2. Peak RSS: a fresh build process per dataset size (every 10th image via a manifest, then all
   images: 10x apart) is sampled every 50 ms with psutil; the value is the peak of the summed
   RSS of the whole process tree (driver, Ray GCS, raylet, agents and workers). RSS over-counts
   shared pages, so this is an upper bound. These builds use 32-sample shards so that even the
   small one keeps every core's worker busy (otherwise it measures fewer workers, not size).
3. End to end: what a user waits for. Each run is a fresh
   process, imports and Ray (or pool) start-up and shutdown included: a pool and a build of
   ``--small`` images (the build's time is its fixed cost) and of all images, interleaved,
   ``--e2e-runs`` times. Steady state = ``(T(N) - T(small))`` of the pool over that of the
   build (target >= 0.9; use ``--images 8000`` or more so that it dominates the noise), with
   the peak tree RSS of each run, and where the small build's time went (the build's own
   report: listing + store creation + Ray start, the shard phase, Ray stop + finalize). Then
   (unless ``--skip-joined``) the small build in fresh processes that join one running local
   Ray (``ray start`` in a private temporary folder, the build's own CPU count): the first
   build on it, then the median of ``--e2e-runs``, what a user who keeps a Ray running pays.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.runner import Bench, Row, Run, add_json_argument, ratio
from benchmarks.suite.build.e2e import build_row as fresh_build_row
from benchmarks.suite.build.e2e import end_to_end, joined
from benchmarks.suite.build.fresh import pillow_job

__all__ = ["build_row", "main", "pool_row"]

POOL, BUILD = "pillow pool", "precompute build"


def pool_row(paths: list[str], size: int, cores: int) -> Row:
    """A bare Pillow pool over ``paths`` (pool start-up and shutdown left out of the timing)."""

    def body(run: Run) -> int:
        with run.untimed():
            pool = mp.get_context("fork").Pool(cores)
            pool.map(pillow_job, [(paths[0], size)] * cores)  # workers up
        out = pool.map(pillow_job, [(p, size) for p in paths], chunksize=8)
        with run.untimed():
            pool.close()  # workers exit on their own: a SIGTERM (terminate) makes the forked
            pool.join()  # copies of the Ray driver print its signal handler's stack dumps
        if len(out) != len(paths):
            raise RuntimeError(f"pool returned {len(out)} of {len(paths)} images")
        return len(out)

    return Row(POOL, body, "tree", unit="image", show=("rate", "cpu_ms", "wall_s"))


def build_row(src: Path, work: Path, spec: Any, n: int) -> Row:
    """``precompute.job.build`` into a fresh output, Ray already up (CPU of driver + Ray)."""
    from precompute.job import build

    def body(run: Run) -> int:
        with run.untimed():
            shutil.rmtree(work / "store", ignore_errors=True)
        build(str(src), str(work / "store"), spec, progress=False)
        return n

    return Row(BUILD, body, "tree", unit="image", show=("rate", "cpu_ms", "wall_s"))


THROUGHPUT_LINES = (
    ratio("ratio build/pool of medians", BUILD, POOL, fmt="{:.2f}", note="(target >= 0.85)"),
    ratio("ratio build/pool of best runs", BUILD, POOL, stat="max", fmt="{:.2f}"),
    ratio(
        "CPU ratio pool/build",
        POOL,
        BUILD,
        figure="cpu_ms",
        fmt="{:.2f}",
        note="(CPU per image of the build: driver + all Ray processes)",
    ),
)


def throughput(args: argparse.Namespace, src: Path, work: Path, bench: Bench) -> None:
    """Section 1: the pool and the build with Ray already up, interleaved."""
    import ray

    from benchmarks.environment import usable_cores
    from precompute import BuildSpec, list_source

    paths = [str(src / k) for k, _ in list_source(src).items]
    spec = BuildSpec(
        size=args.size,
        mode="center-crop",
        shard_samples=args.shard_samples,
        chunk_samples=args.chunk_samples,
    )
    cores = usable_cores()
    ray.init(
        num_cpus=cores, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False
    )
    title = (
        f"throughput ({len(paths)} images of {args.side[0]}-{args.side[1]} px, S={args.size}, "
        f"{cores} cores, shard_samples={args.shard_samples})"
    )
    try:
        rows = [pool_row(paths, args.size, cores), build_row(src, work, spec, len(paths))]
        bench.measure(title, rows, runs=args.runs, lines=THROUGHPUT_LINES)
    finally:
        ray.shutdown()


def peak_rss(args: argparse.Namespace, src: Path, work: Path, bench: Bench) -> None:
    """Section 2: a fresh build of every 10th image (a manifest), then of all: peak tree RSS."""
    from precompute import list_source

    items = list_source(src).items
    small = work / "rss_small.csv"
    small.write_text("path,label\n" + "".join(f"{src / k},{lab}\n" for k, lab in items[::10]))
    rows = [
        fresh_build_row(f"{n} images", source, work / f"rss{n}.store", args.size, (32, 16))
        for n, source in ((len(items[::10]), small), (len(items), src))
    ]
    line = ratio(
        "ratio large/small",
        rows[1].name,
        rows[0].name,
        figure="tree_peak_rss_mib",
        fmt="{:.2f}",
        note="(target: ~1, and < 2048 MiB)",
    )
    title = "peak RSS of a build (whole process tree, fresh local Ray)"
    bench.measure(title, rows, runs=1, warmup=0, lines=[line])


def dataset(args: argparse.Namespace, work: Path) -> Path:
    """Generate (or reuse, with --workdir) the sample dataset of ``--images`` images."""
    from precompute.sample import make_sample_dataset

    lo, hi = args.side
    src = work / f"images{args.images}_{lo}_{hi}"
    if not (src / ".complete").is_file():
        shutil.rmtree(src, ignore_errors=True)
        make_sample_dataset(src, args.images, size_range=(lo, hi), seed=1)
        (src / ".complete").write_text("")
    return src


def _environment() -> dict[str, Any]:
    from benchmarks.environment import environment

    return environment()


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--images",
        type=int,
        help="dataset size (RSS: N/10 and N); default 2 x cores x shard_samples, so that the "
        "last round of shard tasks is full, as it nearly is in a large build",
    )
    ap.add_argument(
        "--side",
        type=int,
        nargs=2,
        default=(200, 480),
        metavar=("MIN", "MAX"),
        help="range of the images' width and height (photo-like by default)",
    )
    ap.add_argument("--size", type=int, default=128, help="stored side length")
    ap.add_argument("--shard-samples", type=int, default=256)
    ap.add_argument("--chunk-samples", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-rss", action="store_true")
    ap.add_argument(
        "--small",
        type=int,
        default=10,
        help="end to end: images in the small run (its build time is the fixed cost)",
    )
    ap.add_argument("--e2e-runs", type=int, default=3, help="end to end: runs of each (median)")
    ap.add_argument("--skip-warm", action="store_true", help="skip 1. (Ray already up)")
    ap.add_argument("--skip-e2e", action="store_true", help="skip the end-to-end section")
    ap.add_argument(
        "--skip-joined",
        action="store_true",
        help="end to end: skip the small builds that join a running local Ray (ray start)",
    )
    ap.add_argument("--workdir", help="keep generated datasets here (default: a temp dir)")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    if args.images is None:
        from benchmarks.environment import usable_cores

        args.images = 2 * usable_cores() * args.shard_samples
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the sections asked for and print their tables and ratios."""
    args = _args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_build_"))
    work.mkdir(parents=True, exist_ok=True)
    with Bench("build", args.json) as bench:
        bench.note("environment: " + json.dumps(_environment(), default=str))
        src = dataset(args, work)
        if not args.skip_warm:
            throughput(args, src, work, bench)
        if not args.skip_e2e:
            end_to_end(args, src, work, bench)
            if not args.skip_joined:
                joined(args, work, bench)
        if not args.skip_rss:
            peak_rss(args, src, work, bench)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
