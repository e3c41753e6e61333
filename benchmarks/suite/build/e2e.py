"""The build benchmark's fresh-process sections: end to end, and joining a running Ray.

Every run is a fresh process (:class:`benchmarks.runner.Command`), imports and Ray (or pool)
start-up and shutdown included, with the peak RSS of its process tree. End to end: a pool and
a build of ``--small`` images and of all, interleaved; the small build is the fixed cost, and
the steady state is ``(T(N) - T(small))`` of the pool over that of the build. Joined: the
small build in fresh processes that join one ``ray start`` Ray.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from benchmarks.runner import Bench, Command, Line, Results, ratio
from benchmarks.suite.build.fresh import RunningRay

__all__ = [
    "build_row",
    "end_to_end",
    "end_to_end_lines",
    "end_to_end_rows",
    "joined",
    "joined_rows",
]

BUILD = "benchmarks.suite.build.fresh:fresh_build"
POOL = "benchmarks.suite.build.fresh:pool_all"
SHOW = ("wall_s", "imports_s", "call_s", "tree_peak_rss_mib")
PHASES = ("start_s", "shards_s", "stop_s")


def build_row(
    name: str, src: Path, out: Path, size: int, shard: tuple[int, int], **kw: Any
) -> Command:
    """A fresh-process build of ``src`` into ``out`` (removed before each run)."""
    args = (str(src), str(out), str(size), *map(str, shard))
    before = lambda: shutil.rmtree(out, ignore_errors=True)  # noqa: E731
    return Command(name, BUILD, args, before=before, memory=True, show=(*SHOW, *PHASES), **kw)


def _write_inputs(src: Path, work: Path, small: int) -> dict[str, tuple[Path, Path]]:
    """Per size: (build source, pool path list); the small one is a manifest of the first."""
    from precompute import list_source

    items = list_source(src).items
    inputs = {}
    for name, chosen in (("small", items[:small]), ("large", items)):
        paths = [str(src / k) for k, _ in chosen]
        listed = work / f"e2e_{name}.txt"
        listed.write_text("\n".join(paths) + "\n")
        manifest = work / f"e2e_{name}.csv"
        lines = (f"{p},{lab}\n" for p, (_, lab) in zip(paths, chosen, strict=True))
        manifest.write_text("path,label\n" + "".join(lines))
        inputs[name] = (src if name == "large" else manifest, listed)
    return inputs


def end_to_end_rows(
    src: Path, work: Path, *, size: int, shard: tuple[int, int], small: int, cores: int
) -> list[Command]:
    """Fresh-process pool and build runs of ``small`` and all images (peak RSS of the tree)."""
    rows = []
    for name, (source, listed) in _write_inputs(src, work, small).items():
        pool_args = (str(listed), str(size), str(cores))
        rows.append(
            Command(
                f"pool_{name}",
                POOL,
                pool_args,
                memory=True,
                show=SHOW,
            )
        )
        rows.append(build_row(f"build_{name}", source, work / f"e2e_{name}.store", size, shard))
    return rows


def _steady(r: Results) -> float:
    pool = r["pool_large"].median("wall_s") - r["pool_small"].median("wall_s")
    build = r["build_large"].median("wall_s") - r["build_small"].median("wall_s")
    return pool / build if build > 0 else float("nan")


def end_to_end_lines(small: int) -> list[Line]:
    """The fixed cost (a small build), and pool/build end to end and in the steady state."""
    return [
        Line(
            f"fixed cost (build of {small} images)",
            lambda r: r["build_small"].median("wall_s"),
            "{:.2f} s",
            "(target <= 3 s)",
        ),
        ratio(
            "ratio pool/build: end to end",
            "pool_large",
            "build_large",
            figure="wall_s",
            fmt="{:.2f}",
        ),
        Line(
            "ratio pool/build: steady state (T(N) - T(small))", _steady, "{:.2f}", "(target >= 0.9)"
        ),
    ]


def joined_rows(
    source: Path, work: Path, ray: RunningRay, *, size: int, shard: tuple[int, int]
) -> list[Command]:
    """Fresh-process builds of ``source`` that join the running ``ray``."""
    out = work / "e2e_joined.store"
    return [build_row("build_small joined", source, out, size, shard, env=ray.env())]


def joined(args: argparse.Namespace, work: Path, bench: Bench) -> None:
    """The small build joining a running local Ray (``ray start``): first, then the runs."""
    from precompute.runtime.raylocal import available_cpus

    shard = (args.shard_samples, args.chunk_samples)
    ray = RunningRay(available_cpus())
    try:
        rows = joined_rows(work / "e2e_small.csv", work, ray, size=args.size, shard=shard)
        first = Line(
            "first build on it (the warm-up run):",
            lambda r: r[rows[0].name].warmup[0].figures["wall_s"],
            "{:.2f} s",
        )
        title = (
            f"build of {args.small} images joining a running local Ray "
            f"(ray start, {available_cpus()} CPUs)"
        )
        results = bench.measure(title, rows, runs=args.e2e_runs, lines=[first])
    finally:
        ray.stop()
    got = results[rows[0].name]
    if any(s.extra.get("ray_address") == "local" for s in [*got.warmup, *got.runs]):
        raise RuntimeError("a build did not join the running Ray")


def end_to_end(args: argparse.Namespace, src: Path, work: Path, bench: Bench) -> None:
    """Section 3: fresh pool and build runs of ``--small`` and all images, interleaved."""
    from benchmarks.environment import usable_cores

    shard = (args.shard_samples, args.chunk_samples)
    rows = end_to_end_rows(
        src, work, size=args.size, shard=shard, small=args.small, cores=usable_cores()
    )
    title = "end to end (a fresh process each run)"
    bench.measure(title, rows, runs=args.e2e_runs, warmup=0, lines=end_to_end_lines(args.small))
