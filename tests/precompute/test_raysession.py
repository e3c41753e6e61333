"""Which Ray a build uses (precompute.runtime.raysession), with real Ray processes and real builds.

A Ray that ``ray start --head`` left running on the machine is joined when it is the size a
build's own local Ray would be, and is never stopped or changed by the builds that join it; a
Ray of another size is left alone (here a build allowed one CPU finds the machine-sized one);
``RAY_ADDRESS`` is honoured as ``ray.init()`` honours it, and an address nobody answers at is
an error naming it. Every Ray here runs in a private temporary folder (``RAY_TMPDIR``), so no
other Ray on the machine is seen or touched, and is stopped by PID at the end (never
``ray stop``, which stops every Ray of the user).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from benchmarks.runner import measure
from benchmarks.suite.build.e2e import joined_rows
from benchmarks.suite.build.fresh import RunningRay
from precompute import open_store_info
from precompute.runtime.raylocal import available_cpus
from precompute.runtime.raysession import _unrelated
from tests.processes import REPO, running

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BUILD = """
import json, sys
from precompute import BuildSpec, build
args = sys.argv[3:]
attrs = build(sys.argv[1], sys.argv[2], BuildSpec(size=16, shard_samples=16, chunk_samples=8),
              progress=False, ray_address=args[0] if args else None, runner="ray")
print(json.dumps({"ray_address": attrs["report"]["ray_address"],
                  "samples": attrs["report"]["num_samples"]}))
"""

RESOURCES = """
import json, logging, ray
ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)  # auth as ray start's
nodes = [n for n in ray.nodes() if n["Alive"]]
print(json.dumps({"address": ray.get_runtime_context().gcs_address, "nodes": len(nodes),
                  "cpus": ray.cluster_resources().get("CPU")}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return {**env, "RAY_TMPDIR": tmp, "PYTHONPATH": str(REPO), **extra}


CLI_BUILD = [sys.executable, "-m", "precompute.cli", "build"]


def _proc(
    command: list[str], env: dict[str, str], cpus: set[int] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` from the repository with ``env`` (on ``cpus`` only)."""
    return subprocess.run(
        command,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )


def _ok(
    command: list[str], env: dict[str, str], cpus: set[int] | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`_proc`, which must exit 0."""
    proc = _proc(command, env, cpus)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _run(code: str, env: dict[str, str], *args: object) -> dict[str, object]:
    proc = _ok([sys.executable, "-c", code, *map(str, args)], env)
    row: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def _run_lines(code: str, env: dict[str, str], *args: object) -> list[dict[str, object]]:
    """Run ``code`` (one JSON line printed by each part) and return the lines, decoded."""
    out = _ok([sys.executable, "-c", code, *map(str, args)], env).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _cli_build(env: dict[str, str], src: Path, out: Path, cpus: set[int] | None = None) -> str:
    """Run ``precompute build SRC --out OUT --runner ray`` (no --ray-address); its stderr.

    ``--runner ray``: a small source's default runner (auto) builds it in process instead.
    """
    command = [*CLI_BUILD, str(src), "--out", str(out), "--size", "16", "--runner", "ray"]
    return _ok(command, env, cpus).stderr


@pytest.fixture(scope="module")
def joinable() -> Iterator[RunningRay]:
    """A ``ray start`` Ray the size of a build's own local Ray: the builds here join it."""
    head = RunningRay(available_cpus())
    try:
        yield head
    finally:
        _stop(head)


def _stop(head: RunningRay) -> None:
    """Stop ``head``: every process of it (its folder in their arguments) and its folder go."""
    head.stop()
    left = [
        p for p in psutil.process_iter(["cmdline"]) if head.tmp in " ".join(p.info["cmdline"] or [])
    ]
    assert running(left) == []
    assert not Path(head.tmp).exists()


def test_unrelated_rays_are_named_by_why() -> None:
    node = {"Alive": True, "Resources": {"CPU": 4.0}}
    assert _unrelated([node, {"Alive": False}], 4) is None
    assert _unrelated([node, node], 4) == "it has 2 nodes"
    assert _unrelated([node], 2) == "it has 4 CPUs, a local build uses 2"


def test_builds_join_a_running_local_ray_and_leave_it_running_unchanged(
    joinable: RunningRay, small_dataset: Path, tmp_path: Path
) -> None:
    stderr = _cli_build(joinable.env(), small_dataset, tmp_path / "b")
    assert f"precompute: joined the local Ray at {joinable.address}" in stderr  # said, not silent
    report = open_store_info(tmp_path / "b").report
    assert (report["ray_address"], report["num_samples"]) == (joinable.address, 40)
    # the second build (the API's) finds the same Ray, running and usable; then, in the same
    # process, the Ray it leaves is still the one ray start made
    build, resources = _run_lines(BUILD + RESOURCES, joinable.env(), small_dataset, tmp_path / "a")
    assert build == {"ray_address": joinable.address, "samples": 40}
    assert resources == {"address": joinable.address, "nodes": 1, "cpus": available_cpus()}
    assert running(joinable.core) == joinable.core  # GCS and raylet: the same processes


def test_a_running_ray_of_another_size_is_left_alone(
    joinable: RunningRay, small_dataset: Path, tmp_path: Path
) -> None:
    # a build allowed one CPU of the machine would start a local Ray of 1 CPU: the running
    # Ray, the machine's size, is of another size for it
    n = available_cpus()
    assert n >= 2, "the session's tests are written for a machine of 2 CPUs or more"
    one_cpu = {min(os.sched_getaffinity(0))}
    stderr = _cli_build(joinable.env(), small_dataset, tmp_path / "own", cpus=one_cpu)
    assert (
        f"precompute: not joining the local Ray at {joinable.address}: it has {n} CPUs, "
        f"a local build uses 1; starting a local Ray (--ray-address auto joins it)" in stderr
    )
    assert open_store_info(tmp_path / "own").report["ray_address"] == "local"  # its own Ray
    assert running(joinable.core) == joinable.core
    row = _run(RESOURCES, joinable.env())
    assert (row["address"], row["cpus"]) == (joinable.address, n)


def test_a_ray_address_variable_nobody_answers_at_is_named_at_once(
    small_dataset: Path, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{_free_port()}"  # closed: Ray itself would retry for minutes
    env = {**_env("/tmp"), "RAY_ADDRESS": address}  # Ray's own temporary folder: no ray start
    proc = _proc(
        [*CLI_BUILD, str(small_dataset), "--out", str(tmp_path / "s"), "--size", "16"], env
    )
    assert proc.returncode == 1
    assert f"cannot start or reach Ray at {address} (RAY_ADDRESS={address})" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_source_that_fails_while_ray_starts_stops_that_ray(tmp_path: Path) -> None:
    """The source is listed while the build's own Ray starts: its error still leaves no Ray.

    ``--ray-address local`` starts that Ray whatever ``RAY_ADDRESS`` says (here an address
    nobody answers at, which would fail the build with exit status 1 at once).
    """
    manifest = tmp_path / "bad.jsonl"
    manifest.write_text('{"path": "a.jpg", "label": 0}\nnot json\n')
    tmp = tempfile.mkdtemp(prefix="nsr", dir="/tmp")  # short: Ray's socket paths
    try:
        flags = ["--out", str(tmp_path / "s"), "--size", "16", "--ray-address", "local"]
        env = _env(tmp, RAY_ADDRESS=f"127.0.0.1:{_free_port()}")
        proc = _proc([*CLI_BUILD, str(manifest), *flags], env)
        assert proc.returncode == 2  # a usage error, as before Ray started in parallel
        assert f"{manifest}: line 2 is not JSON" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert "cannot start or reach Ray" not in proc.stderr
        assert (Path(tmp) / "ray").is_dir()  # the build's own Ray had started, in this folder
        left = [
            p for p in psutil.process_iter(["cmdline"]) if tmp in " ".join(p.info["cmdline"] or [])
        ]
        _gone, alive = psutil.wait_procs(left, timeout=20)
        assert running(alive) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_build_benchmarks_joined_builds_join_the_running_ray(
    joinable: RunningRay, small_dataset: Path, tmp_path: Path
) -> None:
    """The build benchmark's joined section: fresh builds that join a real ``ray start`` Ray."""
    rows = joined_rows(small_dataset, tmp_path, joinable, size=16, shard=(8, 4))
    # one fresh build that joins (the section's warm-up runs are the same fresh builds)
    (sample,) = measure(rows, runs=1, warmup=0)[rows[0].name].runs
    assert sample.extra["ray_address"] == joinable.address
    assert sample.figures["wall_s"] >= sample.figures["call_s"] > 0
    assert sample.figures["shards_s"] > 0
