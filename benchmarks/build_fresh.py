"""Fresh-process runs for ``bench_build``: a whole build or a whole Pillow pool, as a user runs it.

Each run is a new Python process (imports, Ray or pool start-up and shutdown included), sampled
every 50 ms with psutil for the peak of the summed RSS of its process tree (driver, Ray GCS,
raylet, agents and workers; RSS over-counts shared pages, so this is an upper bound).

:func:`bench_end_to_end` times a small and a large dataset with both, interleaved, and derives
the fixed cost (a small build) and the steady state: ``(T(N) - T(small))`` of the pool over
that of the build, i.e. throughput once start-up is paid. A build run also says where its time
went, from the build's own report: ``start_s`` (listing, store creation and Ray start),
``shards_s`` (Ray Data's executor and worker start-up, and the shard tasks) and ``stop_s`` (Ray
shutdown and finalizing the store); ``imports_s`` is the import of ``precompute``.

:func:`bench_joined` times the small build joining a running local Ray (:class:`RunningRay`,
``ray start`` in a private temporary folder): the first build on it, then the median of the
next ones, what a user who keeps a Ray running pays per build.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from PIL import Image, ImageOps

__all__ = [
    "RunningRay",
    "bench_end_to_end",
    "bench_joined",
    "medians",
    "peak_rss",
    "pillow_job",
    "run_fresh",
]

BILINEAR = Image.Resampling.BILINEAR

_BUILD_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from precompute import BuildSpec
from precompute.job import build
t1 = time.perf_counter()
spec = BuildSpec(size=int(sys.argv[3]), shard_samples=int(sys.argv[4]),
                 chunk_samples=int(sys.argv[5]))
report = build(sys.argv[1], sys.argv[2], spec, progress=False)["report"]
call = time.perf_counter() - t1
print(json.dumps({"imports_s": t1 - t0, "call_s": call, "ray_address": report["ray_address"],
                  "start_s": report["seconds"] - report["shard_seconds"],
                  "shards_s": report["shard_seconds"], "stop_s": call - report["seconds"]}))
"""

_POOL_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from benchmarks.build_fresh import pool_all
t1 = time.perf_counter()
pool_all(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
print(json.dumps({"imports_s": t1 - t0, "call_s": time.perf_counter() - t1}))
"""


def pillow_job(args: tuple[str, int]) -> np.ndarray:
    """Decode + resize one file as the build does (EXIF transpose, RGB, bilinear centre crop)."""
    path, size = args
    img = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    w, h = img.size
    side = min(w, h)
    box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
    return np.asarray(img.resize((size, size), BILINEAR, box=box))


def pool_all(paths_file: str, size: int, cores: int) -> None:
    """Start a Pillow pool, decode + resize every path listed in ``paths_file``, stop the pool."""
    paths = Path(paths_file).read_text().splitlines()
    with mp.get_context("fork").Pool(cores) as pool:
        out = pool.map(pillow_job, [(p, size) for p in paths], chunksize=8)
    if len(out) != len(paths):
        raise RuntimeError(f"pool returned {len(out)} of {len(paths)} images")


def _tree_rss(proc: psutil.Process) -> tuple[int, int]:
    total = count = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # the process has exited
        return 0, 0
    for p in procs:
        try:
            total += p.memory_info().rss
            count += 1
        except psutil.Error:
            continue
    return total, count


def run_fresh(code: str, *argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh Python; return its JSON line plus peak tree RSS and seconds."""
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, env=env)
    proc, peak, done = psutil.Process(child.pid), (0, 0), threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc))
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    stdout, _ = child.communicate()
    seconds = time.perf_counter() - t0
    done.set()
    thread.join()
    if child.returncode:
        raise RuntimeError(f"{argv[0]}: fresh run failed with exit code {child.returncode}")
    lines = stdout.decode().strip().splitlines()
    row = json.loads(lines[-1]) if lines else {}
    return {**row, "seconds": seconds, "peak_rss_mb": peak[0] / 2**20, "procs": peak[1]}


def peak_rss(src: Path, out: Path, size: int) -> tuple[int, int, float]:
    """Build ``src`` (32-sample shards) in a fresh process; return (peak RSS, procs, seconds)."""
    row = run_fresh(_BUILD_CHILD, str(src), str(out), str(size), "32", "16")
    return int(row["peak_rss_mb"] * 2**20), row["procs"], row["seconds"]


class RunningRay:
    """A ``ray start --head --block`` Ray in a private temporary folder (``RAY_TMPDIR``).

    Builds given :meth:`env` find and join it as they would a user's ``ray start`` Ray;
    :meth:`stop` kills its processes by PID (never ``ray stop``, which stops every Ray of the
    user on the machine).
    """

    def __init__(self, cpus: int) -> None:
        self.tmp = tempfile.mkdtemp(prefix="nbr", dir="/tmp")  # short: Ray's socket paths
        ray_cli = str(Path(sys.executable).with_name("ray"))
        command = [ray_cli, "start", "--head", "--block", "--port=0", f"--num-cpus={cpus}"]
        command += ["--include-dashboard=false", "--disable-usage-stats"]
        self.proc = subprocess.Popen(
            command,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while not (Path(self.tmp) / "ray" / "ray_current_cluster").is_file():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("ray start --head did not come up")
            time.sleep(0.2)

    def env(self) -> dict[str, str]:
        """The environment of a build that finds this Ray (and no ``RAY_ADDRESS``)."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        return {**env, "RAY_TMPDIR": self.tmp}

    def stop(self) -> None:
        """Kill the Ray's processes by PID and remove its folder."""
        root = psutil.Process(self.proc.pid)
        family = [root, *root.children(recursive=True)]
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(family, timeout=20)
        self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def bench_joined(
    source: Path, work: Path, *, size: int, shard: tuple[int, int], runs: int, cpus: int
) -> list[dict[str, Any]]:
    """Fresh-process builds of ``source`` that join one running local Ray; the first is first."""
    ray = RunningRay(cpus)
    try:
        rows = []
        for _ in range(runs + 1):
            out = work / "e2e_joined.store"
            shutil.rmtree(out, ignore_errors=True)
            args = (str(source), str(out), str(size), *map(str, shard))
            rows.append(run_fresh(_BUILD_CHILD, *args, env=ray.env()))
    finally:
        ray.stop()
    if any(row["ray_address"] == "local" for row in rows):
        raise RuntimeError("a build did not join the running Ray")
    return rows


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
        manifest.write_text(
            "path,label\n"
            + "".join(f"{p},{lab}\n" for p, (_, lab) in zip(paths, chosen, strict=True))
        )
        inputs[name] = (src if name == "large" else manifest, listed)
    return inputs


def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The median of every numeric field of ``rows`` (``ray_address`` is not one)."""
    numeric = [f for f, v in rows[0].items() if isinstance(v, (int, float))]
    return {f: statistics.median(r[f] for r in rows) for f in numeric}


def bench_end_to_end(
    src: Path, work: Path, *, size: int, shard: tuple[int, int], small: int, runs: int, cores: int
) -> dict[str, Any]:
    """Fresh-process pool and build runs of ``small`` and all images, interleaved; medians."""
    inputs = _write_inputs(src, work, small)
    rows: dict[str, list[dict[str, Any]]] = {}
    for _ in range(runs):
        for name, (source, listed) in inputs.items():
            rows.setdefault(f"pool_{name}", []).append(
                run_fresh(_POOL_CHILD, str(listed), str(size), str(cores))
            )
            out = work / f"e2e_{name}.store"
            shutil.rmtree(out, ignore_errors=True)
            rows.setdefault(f"build_{name}", []).append(
                run_fresh(_BUILD_CHILD, str(source), str(out), str(size), *map(str, shard))
            )
    med = {k: medians(v) for k, v in rows.items()}
    pool_steady = med["pool_large"]["seconds"] - med["pool_small"]["seconds"]
    build_steady = med["build_large"]["seconds"] - med["build_small"]["seconds"]
    return {
        "runs": rows,
        "median": med,
        "ratio_end_to_end": med["pool_large"]["seconds"] / med["build_large"]["seconds"],
        "ratio_steady": pool_steady / build_steady if build_steady > 0 else float("nan"),
        "fixed_cost_s": med["build_small"]["seconds"],
    }
