"""Benchmark ``precompute build``: throughput vs a bare Pillow pool, and peak RSS vs dataset size.

Run: ``.venv/bin/python -m benchmarks.bench_build [--images 8000] [--size 256] ...``

1. Throughput: the same files, the same cores, the same decode+resize (Pillow open, EXIF
   transpose, convert to RGB, bilinear centre-crop resize to S). The baseline is a
   ``multiprocessing.Pool`` returning the pixels to the parent; the build is ``precompute.build``
   on local Ray (already started: Ray start-up is outside the timed part), writing a store.
   Warm-up first, then ``--runs`` alternating runs of each; ratio = build / pool throughput
   (target >= 0.85) of the medians and of the best runs, plus CPU seconds per image of each
   (process trees), which other load on a shared machine disturbs much less than wall time.
2. Peak RSS: a fresh build process per dataset size (every 10th image via a manifest, then all
   images: 10x apart) is sampled every 50 ms with psutil; the value is the peak of the summed
   RSS of the whole process tree (driver, Ray GCS, raylet, agents and workers). RSS over-counts
   shared pages, so this is an upper bound. These builds use 32-sample shards so that even the
   small one keeps every core's worker busy (otherwise it measures fewer workers, not size).
3. End to end (:mod:`benchmarks.build_fresh`): what a user waits for. Each run is a fresh
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
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.build_fresh import bench_end_to_end, bench_joined, medians, peak_rss, pillow_job
from benchmarks.common import tree_cpu_seconds
from benchmarks.environment import usable_cores
from precompute import BuildSpec, list_source
from precompute.sample import make_sample_dataset


def time_pool(paths: list[str], size: int, cores: int) -> tuple[float, float]:
    """(seconds, CPU seconds) of a bare Pillow pool decoding+resizing ``paths``.

    Pool start-up is excluded from the seconds; CPU seconds count the parent and workers.
    """
    with mp.get_context("fork").Pool(cores) as pool:
        pool.map(pillow_job, [(paths[0], size)] * cores)  # workers up
        c0, t0 = tree_cpu_seconds(), time.perf_counter()
        out = pool.map(pillow_job, [(p, size) for p in paths], chunksize=8)
        elapsed = time.perf_counter() - t0
        pool.close()  # workers exit on their own: a SIGTERM (terminate) makes the forked
        pool.join()  # copies of the Ray driver print its signal handler's stack dumps
    cpu = tree_cpu_seconds() - c0  # the workers are reaped now: their CPU is in children_*
    assert len(out) == len(paths)
    return elapsed, cpu


def time_build(src: Path, work: Path, spec: BuildSpec) -> tuple[float, float]:
    """(seconds, CPU seconds of driver + Ray) of a build into a fresh output (Ray already up)."""
    from precompute.job import build

    out = work / "store"
    shutil.rmtree(out, ignore_errors=True)
    c0, t0 = tree_cpu_seconds(), time.perf_counter()
    build(str(src), str(out), spec, progress=False)
    return time.perf_counter() - t0, tree_cpu_seconds() - c0


def dataset(args: argparse.Namespace, work: Path) -> Path:
    """Generate (or reuse, with --workdir) the sample dataset of ``--images`` images."""
    lo, hi = args.side
    src = work / f"images{args.images}_{lo}_{hi}"
    if not (src / ".complete").is_file():
        shutil.rmtree(src, ignore_errors=True)
        make_sample_dataset(src, args.images, size_range=(lo, hi), seed=1)
        (src / ".complete").write_text("")
    return src


def bench_throughput(args: argparse.Namespace, src: Path, work: Path) -> dict[str, Any]:
    import ray

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
    try:
        time_build(src, work, spec)  # warm-up: Ray, worker imports
        time_pool(paths[:32], args.size, cores)
        pool, built = [], []
        for _ in range(args.runs):
            pool.append(time_pool(paths, args.size, cores))
            built.append(time_build(src, work, spec))
    finally:
        ray.shutdown()
    n = len(paths)
    pool_s, build_s = [r[0] for r in pool], [r[0] for r in built]
    pool_m, build_m = statistics.median(pool_s), statistics.median(build_s)
    pool_cpu, build_cpu = (
        statistics.median(r[1] for r in pool),
        statistics.median(r[1] for r in built),
    )
    return {
        "images": n,
        "cores": cores,
        "pool_s": pool_s,
        "build_s": build_s,
        "pool_img_s": n / pool_m,
        "build_img_s": n / build_m,
        "ratio": pool_m / build_m,
        "ratio_best": min(pool_s) / min(build_s),
        "pool_cpu_ms": 1000 * pool_cpu / n,
        "build_cpu_ms": 1000 * build_cpu / n,
    }


def bench_rss(args: argparse.Namespace, src: Path, work: Path) -> list[dict[str, Any]]:
    """Peak RSS of builds over the first N/10 images (a manifest) and all N images."""
    items = list_source(src).items
    small = work / "rss_small.csv"
    small.write_text("path,label\n" + "".join(f"{src / k},{lab}\n" for k, lab in items[::10]))
    rows = []
    for n, source in ((len(items[::10]), small), (len(items), src)):
        out = work / f"rss{n}.store"
        shutil.rmtree(out, ignore_errors=True)
        peak, procs, secs = peak_rss(source, out, args.size)
        rows.append({"images": n, "peak_rss_mb": peak / 2**20, "procs": procs, "seconds": secs})
    return rows


def print_end_to_end(args: argparse.Namespace, src: Path, work: Path) -> None:
    """Run and print the fresh-process section: fixed cost, steady state, peak RSS."""
    shard = (args.shard_samples, args.chunk_samples)
    e2e = bench_end_to_end(
        src,
        work,
        size=args.size,
        shard=shard,
        small=args.small,
        runs=args.e2e_runs,
        cores=usable_cores(),
    )
    med = e2e["median"]
    print(f"end to end (fresh process each, median of {args.e2e_runs}, interleaved):")
    for name, row in med.items():
        print(
            f"  {name:12s} {row['seconds']:7.2f} s  (imports {row['imports_s']:.2f} s, "
            f"call {row['call_s']:.2f} s)  peak RSS {row['peak_rss_mb']:6.0f} MiB"
        )
    small = med["build_small"]
    print(
        f"  where the build of {args.small} images spent its time: imports "
        f"{small['imports_s']:.2f} s, list + create store + Ray start {small['start_s']:.2f} s, "
        f"shards (Ray Data + worker start-up + tasks) {small['shards_s']:.2f} s, "
        f"Ray stop + finalize {small['stop_s']:.2f} s"
    )
    if not args.skip_joined:
        _print_joined(args, work, shard)
    print(
        f"  fixed cost (build of {args.small} images) {e2e['fixed_cost_s']:.2f} s (target <= 3 s); "
        f"ratio pool/build: end to end {e2e['ratio_end_to_end']:.2f}, "
        f"steady state (T(N) - T(small)) {e2e['ratio_steady']:.2f} (target >= 0.9)"
    )


def _print_joined(args: argparse.Namespace, work: Path, shard: tuple[int, int]) -> None:
    """The small build joining a running local Ray (``ray start``): first, then the median."""
    from precompute.raylocal import available_cpus

    rows = bench_joined(
        work / "e2e_small.csv",
        work,
        size=args.size,
        shard=shard,
        runs=args.e2e_runs,
        cpus=available_cpus(),
    )
    med = medians(rows[1:])
    print(
        f"  build of {args.small} images joining a running local Ray (ray start, "
        f"{available_cpus()} CPUs): first {rows[0]['seconds']:.2f} s, then median of "
        f"{args.e2e_runs} {med['seconds']:.2f} s (imports {med['imports_s']:.2f} s, list + "
        f"join {med['start_s']:.2f} s, shards {med['shards_s']:.2f} s, disconnect + finalize "
        f"{med['stop_s']:.2f} s)  peak RSS of the build's process {med['peak_rss_mb']:.0f} MiB"
    )


def _environment() -> dict[str, Any]:
    try:
        from benchmarks.environment import environment

        return environment()
    except Exception as exc:  # the shared helper is optional for this script
        return {"cores": usable_cores(), "python": sys.version.split()[0], "note": repr(exc)}


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
    args = ap.parse_args(argv)
    if args.images is None:
        args.images = 2 * usable_cores() * args.shard_samples
    return args


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_build_"))
    work.mkdir(parents=True, exist_ok=True)
    print("environment:", json.dumps(_environment(), default=str))
    src = dataset(args, work)
    if not args.skip_warm:
        tp = bench_throughput(args, src, work)
        print(
            f"throughput ({tp['images']} images of {args.side[0]}-{args.side[1]} px, "
            f"S={args.size}, {tp['cores']} cores, "
            f"shard_samples={args.shard_samples}, median of {args.runs}):"
        )
        for name, rate, runs in (
            ("pillow pool     ", tp["pool_img_s"], tp["pool_s"]),
            ("precompute build", tp["build_img_s"], tp["build_s"]),
        ):
            print(f"  {name} {rate:8.1f} img/s  runs (s) {[round(r, 2) for r in runs]}")
        print(
            f"  ratio build/pool {tp['ratio']:.2f} of medians, {tp['ratio_best']:.2f} of best runs "
            "(target >= 0.85)"
        )
        print(
            f"  CPU per image: pool {tp['pool_cpu_ms']:.2f} ms, build {tp['build_cpu_ms']:.2f} ms "
            f"(driver + all Ray processes); CPU ratio pool/build "
            f"{tp['pool_cpu_ms'] / tp['build_cpu_ms']:.2f}"
        )
    if not args.skip_e2e:
        print_end_to_end(args, src, work)
    if not args.skip_rss:
        rows = bench_rss(args, src, work)
        print("peak RSS of a build (whole process tree, fresh local Ray):")
        for r in rows:
            print(
                f"  {r['images']:6d} images  {r['peak_rss_mb']:8.0f} MiB  "
                f"({r['procs']} processes at the peak)  {r['seconds']:.1f} s"
            )
        print(
            f"  ratio large/small {rows[1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f}  "
            "(target: ~1, and < 2048 MiB)"
        )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
