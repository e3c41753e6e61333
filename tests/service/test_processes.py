"""Several real processes on one cache: racing builders, a SIGKILLed builder, a foreign lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from precompute.errors import StoreIncompleteError
from precompute.format import open_store_info
from service import Cache, StoreInUseError
from tests.processes import spawn_module
from tests.servers import wait_for
from tests.service.helpers import SPEC, index_builder, make_source, read_log

WORKER = "tests.service.worker"  # the module each spawned process runs


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return make_source(tmp_path / "src")


def test_racing_processes_build_once(
    tmp_path: Path, source: Path, procs: list[subprocess.Popen[str]]
) -> None:
    root, log, go = tmp_path / "cache", tmp_path / "builds.log", tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(3)]
    procs += [spawn_module(WORKER, "race", root, source, log, go, r) for r in ready]
    for r, proc in zip(ready, procs, strict=True):  # each imported and set up ...
        wait_for(r, proc, timeout=60.0)
    go.write_text("go")  # ... then the barrier file releases them together
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    paths = {json.loads(out)["path"] for out, _ in outs}
    assert len(paths) == 1
    assert len(read_log(log)) == 1  # one builder ran, the others waited and reused
    assert open_store_info(paths.pop()).layout.num_samples == 12


def test_killed_builder_leaves_nothing_complete_and_next_caller_rebuilds(
    tmp_path: Path, source: Path, procs: list[subprocess.Popen[str]]
) -> None:
    root, log, started = tmp_path / "cache", tmp_path / "builds.log", tmp_path / "started"
    procs.append(spawn_module(WORKER, "hang", root, source, log, started))
    wait_for(started, procs[0], timeout=60.0)
    cache = Cache(root, builder=index_builder(log), lock_timeout=60)
    key = cache.key_for(source, SPEC)
    assert cache.status(key)["status"] == "building"
    os.kill(procs[0].pid, signal.SIGKILL)
    procs[0].wait(timeout=30)
    status = cache.status(key)
    assert status["status"] == "interrupted"
    assert status["progress"] == {"shards_done": 1, "shards_total": 2, "fraction": 0.5}
    assert cache.get(key) is None and cache.list() == []
    assert not (root / "stores" / key).exists()
    with pytest.raises(StoreIncompleteError):
        open_store_info(root / "building" / key)
    path = cache.get_or_build(source, SPEC)  # the dead builder's lock died with it
    assert open_store_info(path).num_valid == 12
    assert len(read_log(log)) == 2 and cache.status(key)["status"] == "ready"


def test_lease_in_another_process_blocks_eviction_until_it_dies(
    tmp_path: Path, source: Path, procs: list[subprocess.Popen[str]]
) -> None:
    root, ready = tmp_path / "cache", tmp_path / "ready"
    cache = Cache(root, builder=index_builder())
    path = cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    procs.append(spawn_module(WORKER, "lease", root, key, ready))
    wait_for(ready, procs[0], timeout=60.0)
    assert ready.read_text() == str(path)
    report = cache.gc(budget_bytes=0)
    assert report.evicted == () and report.skipped_leased == (key,)
    with pytest.raises(StoreInUseError):
        cache.remove(key)
    os.kill(procs[0].pid, signal.SIGKILL)  # the kernel drops the dead reader's lease
    procs[0].wait(timeout=30)
    assert cache.gc(budget_bytes=0).evicted == (key,) and not path.exists()
