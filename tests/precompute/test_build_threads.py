"""Threads of a build: one per CPU, and every CPU used (issue 42, items 5 and 6).

A kind known only to this module stores, for each sample, the threads torch and the BLAS and
OpenMP libraries would start inside that sample (``torch.get_num_threads()``, threadpoolctl's
view) and which thread decoded it, so the store itself says what each runner gave its tasks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zarr
from PIL import Image
from threadpoolctl import threadpool_info

from precompute import BuildSpec, build
from precompute.fields import KINDS, FieldSpec, Kind, Storage, register_kind
from precompute.format.layout import StoreLayout
from precompute.pipeline.fieldwork import backends_of
from precompute.pipeline.inprocess import task_shape
from precompute.pipeline.runner import choose, ray_start_seconds
from precompute.pipeline.shardwork import ShardJob
from precompute.runtime.raylocal import available_cpus
from precompute.sources.resolve import plan_tasks, resolve_build
from tests.processes import REPO


class PoolsKind(Kind):
    """An inline kind storing ``1000 * torch threads + the largest pool``, and its thread.

    A value ``v`` > 0 makes the sample take ``v`` ms of CPU (a slow decoder, for the runner
    choice).
    """

    name = "poolsize"
    source = "inline"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((2,), "int32", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        end = time.thread_time() + value / 1000
        while time.thread_time() < end:  # CPU work, as a decoder's
            pass
        pools = max((p["num_threads"] for p in threadpool_info()), default=0)
        thread = hash(__import__("threading").current_thread().name) % 100_000
        return np.asarray([1000 * torch.get_num_threads() + pools, thread], dtype=np.int32)

    def parse_inline(self, raw: Any) -> Any:
        return int(raw)


if "poolsize" not in KINDS:  # also when a Ray worker imports this module to unpickle the kind
    register_kind(PoolsKind())


def source(root: Path, n: int = 12, ms: int = 0) -> Path:
    root.mkdir(parents=True)
    rows = ["image,poolsize"]
    for i in range(n):
        Image.new("RGB", (24, 20), (i, 9, 9)).save(root / f"{i}.png")
        rows.append(f"{i}.png,{ms}")
    (root / "m.csv").write_text("\n".join(rows) + "\n")
    return root / "m.csv"


FIELDS = (FieldSpec("image", "image"), FieldSpec("poolsize", "poolsize"))
SPEC = BuildSpec(size=8, shard_samples=4, chunk_samples=2, fields=FIELDS)


def seen(store: Path) -> tuple[set[int], int]:
    """The pool sizes the samples saw, and how many threads decoded them."""
    got = np.asarray(zarr.open_array(str(store / "poolsize"), mode="r")[:])
    return {int(v) for v in got[:, 0]}, len({int(v) for v in got[:, 1]})


@pytest.fixture(autouse=True)
def _many_threads() -> Any:
    """Pools of two threads at least (this machine's cores may be one), as a busy host has."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(before, 2))
    yield
    torch.set_num_threads(before)


def test_sequential_tasks_run_every_pool_at_one_thread(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    out = tmp_path / "s"
    attrs = build(str(source(tmp_path / "src")), str(out), SPEC, progress=False,
                  runner="sequential")  # fmt: skip
    assert attrs["report"]["runner"] == {"name": "sequential", "why": "--runner sequential"}
    assert seen(out) == ({1001}, 1)  # torch 1, every BLAS/OpenMP pool 1, one thread
    assert torch.get_num_threads() == threads  # the process's own threads are restored


@pytest.mark.ray
def test_ray_tasks_run_every_pool_at_one_thread(ray_local: None, tmp_path: Path) -> None:
    attrs = build(str(source(tmp_path / "src")), str(tmp_path / "s"), SPEC, progress=False)
    assert attrs["report"]["runner"] == {"name": "ray", "why": "a Ray initialised in this process"}
    assert seen(tmp_path / "s")[0] == {1001}


AUTO = """
import json, sys
import tests.precompute.test_build_threads as t
from precompute import BuildSpec, build
attrs = build(sys.argv[1], sys.argv[2], t.SPEC.__class__(**{**t.SPEC.__dict__, "shard_samples":
              int(sys.argv[3]), "chunk_samples": 2}), progress=False)
print(json.dumps({"runner": attrs["report"]["runner"], "ray": "ray" in sys.modules}))
"""


@pytest.mark.slow
def test_auto_builds_a_one_shard_source_in_process_on_every_cpu(tmp_path: Path) -> None:
    """A fresh process, no Ray named: auto runs in process, the one shard on every CPU."""
    out = tmp_path / "s"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", AUTO, str(source(tmp_path / "src", 24)), str(out), "24"],
        cwd=REPO, capture_output=True, text=True, check=True,
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["runner"]["name"] == "in process" and not got["ray"]  # Ray never imported
    assert "Ray takes about" in got["runner"]["why"]
    pools, threads = seen(out)
    assert pools == {1001} and threads == min(available_cpus(), 24)
    env["RAY_ADDRESS"] = "127.0.0.1:9"  # names a Ray: auto builds on it (nothing answers here)
    proc = subprocess.run(
        [sys.executable, "-c", AUTO, str(tmp_path / "src" / "m.csv"), str(tmp_path / "r"), "24"],
        cwd=REPO, capture_output=True, text=True, check=False,
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert "ClusterError: cannot start or reach Ray at 127.0.0.1:9 (RAY_ADDRESS=" in proc.stderr


def test_fewer_shards_than_cpus_share_the_cpus() -> None:
    assert task_shape(1, 2) == (1, 2)  # 200 samples in one shard: 2 threads
    assert task_shape(3, 16) == (3, 5)
    assert task_shape(13, 2) == (2, 1)
    assert task_shape(1, 1) == (1, 1) and task_shape(0, 4) == (1, 4)


def _job(src: Path, spec: BuildSpec) -> tuple[ShardJob, list[Any]]:
    listed, spec, _ = resolve_build(str(src), spec, False)
    layout = StoreLayout.from_spec(spec, len(listed.items))
    job = ShardJob("unused", layout, spec, listed, backends_of(spec.fields))
    return job, plan_tasks(listed, layout, spec.seed, list(range(layout.num_shards)))


def test_auto_weighs_the_work_against_starting_ray(tmp_path: Path) -> None:
    """Timed samples times the count over the CPUs, against Ray's start (2 CPUs: 5 s)."""
    assert ray_start_seconds(2) == 5.0 and ray_start_seconds(64) == 2.5
    fast, tasks = _job(source(tmp_path / "fast", 40), SPEC)
    choice = choose(fast, tasks, 40, 2)
    assert (choice.runner, choice.cpus) == ("in process", 2), choice
    assert choice.why.startswith("about 0.") and choice.why.endswith("Ray takes about 5 s to start")
    slow, tasks = _job(source(tmp_path / "slow", 200, ms=100), SPEC)  # 200 x 0.1 s on 2 CPUs
    choice = choose(slow, tasks, 200, 2)
    assert choice.runner == "ray" and re.fullmatch(
        r"about 1\d s of work on 2 CPUs; Ray takes about 5 s to start", choice.why
    ), choice


def test_shard_tasks_on_threads_share_a_scene_and_write_the_sequential_bytes(
    tmp_path: Path,
) -> None:
    """Several shard tasks of one process read one cached scene (a lock keeps the cache whole)."""
    from benchmarks.spectral_data import make_scene
    from precompute.cli import spec_from_options
    from precompute.pipeline.inprocess import run_in_process
    from precompute.pipeline.writer import create_or_resume, finalize

    cube, gt = make_scene(30, 26, 7, 4, seed=1)
    np.save(tmp_path / "scene.npy", cube)
    np.save(tmp_path / "gt.npy", gt)
    flags = {"labels": "gt.npy", "patch": 9, "shard_samples": 16, "chunk_samples": 8}
    spec = spec_from_options(None, flags, str(tmp_path / "scene.npy"))
    stores = {}
    for cpus in (1, 4):  # one thread; four shard tasks at a time on four threads
        out = tmp_path / f"s{cpus}"
        listed, built, fp = resolve_build(str(tmp_path / "scene.npy"), spec, False)
        layout = StoreLayout.from_spec(built, len(listed.items))
        create_or_resume(out, built, layout, fp)
        job = ShardJob(str(out), layout, built, listed, backends_of(built.fields))
        tasks = plan_tasks(listed, layout, built.seed, list(range(layout.num_shards)))
        assert len(tasks) >= 4
        results = run_in_process(job, tasks, _NoBar(), cpus)
        assert len(results) == len(tasks)
        finalize(out, {"seconds": 0})
        stores[cpus] = {
            p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("c/*"))
            if p.is_file()
        }
    assert stores[1] and stores[4] == stores[1]


class _NoBar:
    def update(self, n: int) -> None:
        pass
