"""A build on a real 3-node Ray cluster: byte-identical to a local build, survives a lost node.

Which node ran which shard task is Ray's choice; the tests read Ray's own record of it (the task
events its GCS keeps: every attempt of a shard task, its node and how it ended) instead of
assuming one.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from precompute import BuildSpec, build
from precompute.errors import ClusterError
from precompute.format.layout import FIELDS, MARKER_DIR
from precompute.format.verify import verify_store
from precompute.runtime.cluster import check_shared_paths
from precompute.sample import make_sample_dataset

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NUM = 120
# Shards of 12: 10 shard tasks, each long enough (tens of ms) to be caught running on a node.
SPEC = {"size": 32, "shard_samples": 12, "chunk_samples": 4, "seed": 5}
SHARDS = NUM // SPEC["shard_samples"]
FLAGS = [*(f"--{k.replace('_', '-')}={v}" for k, v in SPEC.items()), "--quiet"]


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_dataset(tmp_path_factory.mktemp("src"), NUM, size_range=(96, 256), seed=3)


@pytest.fixture(scope="module")
def local_store(src: Path, ray_local: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same build (:data:`FLAGS`) in this process, on the session's local Ray."""
    out = tmp_path_factory.mktemp("local") / "store"
    build(str(src), str(out), BuildSpec(**SPEC), progress=False)
    assert _report(out)["shards_built"] == SHARDS
    return out


def _build(src: Path, out: Path | str, *, address: str) -> subprocess.Popen[bytes]:
    """The CLI's build of ``src`` on the cluster at ``address``, in a process of its own."""
    argv = [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", str(out), *FLAGS]
    return subprocess.Popen([*argv, "--ray-address", address], stderr=subprocess.PIPE)


def _finish(child: subprocess.Popen[bytes]) -> None:
    _, err = child.communicate(timeout=240)
    assert child.returncode == 0, err.decode()


def _array_files(out: Path) -> dict[str, bytes]:
    """Every file of every array (metadata and shards), by path: the store's bytes."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for name in FIELDS
        for p in sorted((out / name).rglob("*"))
        if p.is_file()
    }


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "zarr.json").read_text())["attributes"]["nostall"]["report"]


def _markers(out: Path) -> int:
    folder = out / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


@dataclass(frozen=True)
class Attempt:
    """One attempt of a shard task, as the cluster's GCS recorded it."""

    task: bytes
    number: int
    node: str  # the node's id (hex)
    ended: str  # FINISHED, FAILED, or "" (not yet reported)
    error: str  # why it failed (an ErrorType name), or ""


def _shard_attempts(address: str) -> list[Attempt]:
    """Every attempt of a shard task (``Map(run)``) of the latest build on the cluster."""
    from ray._raylet import GcsClientOptions, GlobalStateAccessor
    from ray.core.generated import gcs_pb2
    from ray.core.generated.common_pb2 import ErrorType, TaskStatus

    options = GcsClientOptions.create(
        address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False
    )
    gcs = GlobalStateAccessor(options)
    assert gcs.connect(), f"cannot read the GCS at {address}"
    events = [gcs_pb2.TaskEvents.FromString(raw) for raw in gcs.get_task_events()]
    shards = [e for e in events if e.task_info.name == "Map(run)"]
    latest = max((int.from_bytes(e.job_id, "little") for e in shards), default=None)
    attempts = []
    for e in shards:
        if int.from_bytes(e.job_id, "little") != latest:
            continue
        states = {TaskStatus.Name(s) for s in e.state_updates.state_ts_ns}
        ended = next((s for s in ("FINISHED", "FAILED") if s in states), "")
        info = e.state_updates.error_info
        error = ErrorType.Name(info.error_type) if e.state_updates.HasField("error_info") else ""
        node = e.state_updates.node_id.hex()
        attempts.append(Attempt(e.task_id, e.attempt_number, node, ended, error))
    return attempts


def _finished_shards(address: str, shards: int) -> dict[bytes, Attempt]:
    """The attempt that built each shard, once the GCS has them all (workers report each second)."""
    deadline = time.monotonic() + 60
    while True:
        attempts = _shard_attempts(address)
        finished = {a.task: a for a in attempts if a.ended == "FINISHED"}
        if len(finished) == shards:
            return finished
        assert time.monotonic() < deadline, f"{len(finished)} of {shards} shard tasks reported"
        time.sleep(0.2)


def _retried_shards(address: str) -> list[Attempt]:
    """The finished shard attempts numbered 1 or more, once the GCS has one (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        retried = [a for a in _shard_attempts(address) if a.ended == "FINISHED" and a.number > 0]
        if retried:
            return retried
        assert time.monotonic() < deadline, "no shard task was run again"
        time.sleep(0.2)


def _cluster_nodes(cluster: Any) -> set[str]:
    return {n.node_id for n in [cluster.head_node, *cluster.worker_nodes]}


def test_three_node_build_is_byte_identical_to_local(
    ray_cluster: Any, src: Path, local_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cluster"
    _finish(_build(src, out, address=ray_cluster.address))
    report = _report(out)
    assert report["ray_address"] == ray_cluster.address
    built_on = {a.node for a in _finished_shards(ray_cluster.address, SHARDS).values()}
    assert built_on <= _cluster_nodes(ray_cluster)  # whichever nodes Ray chose, all counted
    assert report["ray_nodes"] == len(built_on)
    assert report["shards_built"] == SHARDS
    assert _array_files(out) == _array_files(local_store)
    assert verify_store(out) == []


def test_three_node_build_into_object_storage_needs_no_shared_folder(
    ray_cluster: Any, bucket: str, src: Path, local_store: Path
) -> None:
    from tests.objectservers import objects_under

    url = f"{bucket}/cluster.zarr"
    _finish(_build(src, url, address=ray_cluster.address))
    built_on = {a.node for a in _finished_shards(ray_cluster.address, SHARDS).values()}
    assert built_on <= _cluster_nodes(ray_cluster)
    assert _report_s3(url)["ray_nodes"] == len(built_on)
    arrays = {n: b for n, b in objects_under(url).items() if n.split("/", 1)[0] in FIELDS}
    assert arrays == _array_files(local_store)
    assert verify_store(url) == []


def _report_s3(url: str) -> dict[str, Any]:
    from precompute.storage.location import location

    doc = json.loads(location(f"{url}/zarr.json").read_bytes())
    return dict(doc["attributes"]["nostall"]["report"])


def _shard_tasks(node: Any) -> list[psutil.Process]:
    """The node's Ray workers running a shard task now (titled ``ray::Map(run)``; an idle
    worker is ``ray::IDLE``)."""
    raylet = node.all_processes["raylet"][0].process.pid
    return _shard_tasks_of(psutil.Process(raylet).children(recursive=True))


def _shard_tasks_of(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` titled ``ray::Map(run)`` now."""
    busy = []
    for proc in procs:
        try:
            if proc.cmdline()[:1] == ["ray::Map(run)"] or proc.name() == "ray::Map(run)":
                busy.append(proc)
        except psutil.Error:
            continue
    return busy


def _signal(procs: list[psutil.Process], what: str) -> None:
    """``suspend``, ``resume`` or ``kill`` each of ``procs`` that still runs."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            getattr(proc, what)()


def _status(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return "gone"


def _catch_a_shard_task(cluster: Any, out: Path) -> tuple[Any, list[psutil.Process]]:
    """Stop (SIGSTOP) a worker node's shard tasks mid-run, once 2 shards of ``out`` are done.

    Returns:
        The node and its stopped tasks, or ``(None, [])`` if no worker node runs one now.
    """
    for node in cluster.worker_nodes if _markers(out) >= 2 else ():
        procs = _shard_tasks(node)
        if not procs:
            continue
        _signal(procs, "suspend")  # held mid-task (SIGSTOP): it cannot finish before the loss
        # still titled after the stop: stopped mid-task (a task that had in fact returned
        # would not be run again, and the retry check below would fail)
        if _shard_tasks_of(procs):
            return node, procs
        _signal(procs, "resume")
    return None, []


def test_losing_a_worker_node_mid_build_still_completes_identically(
    ray_cluster: Any, src: Path, local_store: Path, tmp_path: Path
) -> None:
    lost, running, tries = None, [], 0
    while lost is None:  # whichever worker node Ray gave a shard task, once 2 shards are done
        # A shard task here takes a few tens of ms: a build may end before one is caught on a
        # worker node mid-run. That build is then discarded and the next one watched.
        out = tmp_path / f"cluster-{tries}"
        child, tries = _build(src, out, address=ray_cluster.address), tries + 1
        deadline = time.monotonic() + 240
        while lost is None and child.poll() is None:
            assert time.monotonic() < deadline, "build made no progress"
            lost, running = _catch_a_shard_task(ray_cluster, out)
            time.sleep(0.02)
        if lost is None:
            _finish(child)  # built whole before a task was caught: it must still have succeeded
            assert tries < 3, "no shard task caught mid-run on a worker node in 3 builds"
    done = _markers(out)
    ray_cluster.remove_node(lost, allow_graceful=False)  # the node's Ray processes are killed
    _signal(running, "kill")  # and its workers (stopped, they cannot see their raylet go)
    assert done < SHARDS, "the node must be lost mid-build"
    _gone, alive = psutil.wait_procs(running, timeout=60)
    assert [p for p in alive if _status(p) not in (psutil.STATUS_ZOMBIE, "gone")] == []
    _finish(child)  # so Ray ran that shard task again on a node left: every shard is built
    # A stopped worker reports nothing more: the GCS may never learn of the attempt it was on
    # (begun after its last report), but the retry is an attempt numbered 1 or more.
    retried = _retried_shards(ray_cluster.address)
    attempts = _shard_attempts(ray_cluster.address)
    for again in retried:
        assert again.node != lost.node_id, again  # run again on a node left
        before = [a for a in attempts if a.task == again.task and a.number < again.number]
        assert all(a.node == lost.node_id and a.ended != "FINISHED" for a in before), before
    for cut in (a for a in attempts if a.ended and a.ended != "FINISHED"):  # only the lost
        assert cut.node == lost.node_id and cut.error in ("NODE_DIED", "WORKER_DIED"), cut
    assert _markers(out) == SHARDS
    assert _report(out)["shards_built"] == SHARDS
    assert _array_files(out) == _array_files(local_store)
    assert verify_store(out) == []


def test_a_path_a_node_cannot_see_fails_naming_node_and_path(
    ray_local: Any, tmp_path: Path
) -> None:
    missing = str(tmp_path / "not-mounted-here")
    with pytest.raises(ClusterError, match=r"cannot see .*not-mounted-here.*every node mounts"):
        check_shared_paths([str(tmp_path), missing, "s3://bucket/raw"])


# -- a transform from the user's package, on every node -----------------------------------------

_DRIVER_ONLY = """
import os

if os.environ.get("NOSTALL_TEST_DRIVER") != "1":
    raise ImportError("this module imports on the driver only")


def same(sample, key):
    return sample
"""


def _user_build(
    src: Path, out: Path, address: str, code: Path, transform: str, driver_only: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """The CLI's build with ``--transform``: the package is on the driver's path alone.

    The cluster's nodes were started without ``code`` on their path, and the driver runs from
    another folder (Ray puts a driver's working folder on its workers' path): only the build's
    ``runtime_env`` can bring the package to the workers.
    """
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), *sys.path])}
    if driver_only:
        env["NOSTALL_TEST_DRIVER"] = "1"
    argv = [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", str(out)]
    argv += [*FLAGS, "--ray-address", address, "--transform", transform]
    return subprocess.run(argv, capture_output=True, timeout=300, env=env, cwd=out.parent)


def test_a_transform_of_the_users_package_runs_on_the_clusters_workers(
    ray_cluster: Any, src: Path, local_store: Path, tmp_path: Path
) -> None:
    import zarr

    from tests.precompute.userpkg import make_package

    code = tmp_path / "code"
    name = make_package(code)
    (tmp_path / "run").mkdir()
    out = tmp_path / "run" / "store"
    done = _user_build(src, out, ray_cluster.address, code, f"{name}.ops:invert")
    assert done.returncode == 0, done.stderr.decode()
    built_on = {a.node for a in _finished_shards(ray_cluster.address, SHARDS).values()}
    assert _report(out)["ray_nodes"] == len(built_on) >= 2  # several workers ran it
    mine = zarr.open_array(str(out / "image"), mode="r")[:]
    plain = zarr.open_array(str(local_store / "image"), mode="r")[:]
    assert (mine == 255 - plain).all()
    transform = json.loads((out / "zarr.json").read_text())["attributes"]["nostall"]["spec"]
    assert transform["transform"]["name"] == f"{name}.ops:invert"


def test_a_transform_no_worker_can_import_is_refused_before_any_shard(
    ray_cluster: Any, src: Path, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    (code / "driveronly").mkdir(parents=True)
    (code / "driveronly" / "__init__.py").write_text(_DRIVER_ONLY)
    (tmp_path / "run").mkdir()
    out = tmp_path / "run" / "store"
    done = _user_build(src, out, ray_cluster.address, code, "driveronly:same", driver_only=True)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "cannot run transform driveronly:same (shipped as runtime_env py_modules" in err
    assert "this module imports on the driver only" in err
    assert _markers(out) == 0  # no shard was written
