"""What the build benchmark runs in fresh processes: a whole Pillow pool, a whole build, a Ray.

Imports stay light here (precompute is imported inside :func:`fresh_build`): the fresh
processes of :mod:`benchmarks.runner` import this module, and a pool's end-to-end time counts
its imports. :class:`RunningRay` is a ``ray start`` Ray that fresh builds join.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from PIL import Image, ImageOps

__all__ = ["RunningRay", "fresh_build", "pillow_job", "pool_all"]


def pillow_job(args: tuple[str, int]) -> np.ndarray:
    """Decode + resize one file as the build does (EXIF transpose, RGB, bilinear centre crop)."""
    path, size = args
    img = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    w, h = img.size
    side = min(w, h)
    box = ((w - side) / 2, (h - side) / 2, (w + side) / 2, (h + side) / 2)
    return np.asarray(img.resize((size, size), Image.Resampling.BILINEAR, box=box))


def pool_all(paths_file: str, size: str, cores: str) -> None:
    """Start a Pillow pool, decode + resize every path listed in ``paths_file``, stop the pool."""
    paths = Path(paths_file).read_text().splitlines()
    with mp.get_context("fork").Pool(int(cores)) as pool:
        out = pool.map(pillow_job, [(p, int(size)) for p in paths], chunksize=8)
    if len(out) != len(paths):
        raise RuntimeError(f"pool returned {len(out)} of {len(paths)} images")


def fresh_build(src: str, out: str, size: str, shard: str, chunk: str) -> dict[str, Any]:
    """(In a fresh process) build ``src``; where the time went, from the build's own report."""
    t0 = time.perf_counter()
    from precompute import BuildSpec
    from precompute.job import build

    t1 = time.perf_counter()
    spec = BuildSpec(size=int(size), shard_samples=int(shard), chunk_samples=int(chunk))
    report = build(src, out, spec, progress=False, runner="ray")["report"]  # the Ray build
    call = time.perf_counter() - t1
    return {
        "imports_s": t1 - t0,
        "ray_address": report["ray_address"],
        "start_s": report["seconds"] - report["shard_seconds"],
        "shards_s": report["shard_seconds"],
        "stop_s": call - report["seconds"],
    }


class RunningRay:
    """A ``ray start --head --block`` Ray in a private temporary folder (``RAY_TMPDIR``).

    Builds given :meth:`env` find and join it as they would a user's ``ray start`` Ray;
    :meth:`stop` kills its processes by PID (never ``ray stop``, which stops every Ray of the
    user on the machine). Up once its GCS and raylet run and it recorded its :attr:`address`;
    :attr:`core` holds those two processes.
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
        self.core: list[psutil.Process] = []
        recorded = Path(self.tmp) / "ray" / "ray_current_cluster"
        deadline = time.monotonic() + 120
        while not (recorded.is_file() and self._core()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()  # a Ray that came up only in part leaves nothing behind
                raise RuntimeError("ray start --head did not come up")
            time.sleep(0.2)
        self.core = self._core()
        self.address = recorded.read_text().strip()

    def _core(self) -> list[psutil.Process]:
        """Its GCS and raylet, once both run."""
        with contextlib.suppress(psutil.NoSuchProcess):
            family = psutil.Process(self.proc.pid).children(recursive=True)
            core = [p for p in family if p.name() in ("gcs_server", "raylet")]
            return core if len(core) == 2 else []
        return []

    def env(self) -> dict[str, str]:
        """The environment of a build that finds this Ray (and no ``RAY_ADDRESS``)."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        return {**env, "RAY_TMPDIR": self.tmp}

    def stop(self) -> None:
        """Kill the Ray's processes by PID and remove its folder."""
        try:
            root = psutil.Process(self.proc.pid)
            family = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:  # ray start exited: its GCS and raylet may still run
            family = []
        family += [p for p in self.core if p not in family]
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(family, timeout=20)
        self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)
