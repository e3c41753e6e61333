"""One scenario, every cache backend: a key is built once however many callers race for it
(threads of one process, or processes), and a builder SIGKILLed mid-build leaves a store that
is never served and a key the next caller builds. ``local`` is a cache folder (``flock``),
``s3`` and ``az`` a cache root on the real S3 and Azure Blob test servers (claims: conditional
PUTs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from precompute.errors import StoreIncompleteError
from precompute.format.layout import open_store_info
from precompute.storage.location import is_url
from service import Cache
from service.errors import LockTimeoutError
from tests.processes import spawn_module
from tests.servers import wait_for
from tests.service.helpers import SPEC, make_source, read_log
from tests.service.worker import builder_for

WORKER = "tests.service.worker"  # the module each spawned process runs


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return make_source(tmp_path / "src")


def test_racing_threads_build_once_and_a_second_instance_sees_the_store(
    cache_root: str, source: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    cache = Cache(cache_root, builder=builder_for(cache_root, log, delay=0.5))
    paths: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            paths.append(str(cache.get_or_build(source, SPEC)))
        except BaseException as exc:  # carried back to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    key = cache.key_for(source, SPEC)
    assert len(read_log(log)) == 1  # built once
    assert cache.stats.snapshot()["builds"] == 1
    assert paths == [f"{cache_root}/stores/{key}"] * 6
    other = Cache(cache_root, builder=builder_for(cache_root, log))  # another server, say
    assert str(other.get(key)) == paths[0] and other.info(key).num_samples == 12
    assert str(other.get_or_build(source, SPEC)) == paths[0] and len(read_log(log)) == 1
    info = open_store_info(paths[0])
    assert info.attrs["complete"] and info.source_fingerprint == other.info(key).source_fingerprint
    assert other.status(key)["status"] == "ready"


RACERS = 2  # processes released together at a barrier: one builds, the other waits and reuses


@pytest.mark.slow
def test_racing_processes_build_once(
    cache_root: str, source: Path, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    log, go = tmp_path / "builds.log", tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(RACERS)]
    procs += [spawn_module(WORKER, "race", cache_root, source, log, go, r) for r in ready]
    for r, proc in zip(ready, procs, strict=True):  # each imported and set up ...
        wait_for(r, proc, timeout=60.0)
    go.write_text("go")  # ... then the barrier file releases them together
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * RACERS, outs
    cache = Cache(cache_root)
    key = cache.key_for(source, SPEC)
    assert [json.loads(out)["path"] for out, _ in outs] == [f"{cache_root}/stores/{key}"] * RACERS
    assert len(read_log(log)) == 1  # one builder ran, the others waited and reused
    assert open_store_info(f"{cache_root}/stores/{key}").layout.num_samples == 12
    assert [e.key for e in cache.list()] == [key]


def test_a_killed_builders_store_is_never_served_and_the_next_caller_builds(
    cache_root: str, source: Path, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    log, started = tmp_path / "builds.log", tmp_path / "started"
    procs.append(spawn_module(WORKER, "hang", cache_root, source, log, started))
    wait_for(started, procs[0], timeout=60.0)
    cache = Cache(cache_root, builder=builder_for(cache_root, log), lock_timeout=0.5)
    key = cache.key_for(source, SPEC)
    half = {  # one shard of 8 samples written: the fraction counts samples
        "shards_done": 1, "shards_total": 2, "samples_done": 8, "samples_total": 12,
        "fraction": 8 / 12,
    }  # fmt: skip
    assert cache.status(key)["status"] == "building" and cache.status(key)["progress"] == half
    # a live builder holds the claim: wait, time out with an error naming the lock or holder
    if is_url(cache_root):
        held_by = rf"waiting for the build of {key} by .* pid {procs[0].pid}"
    else:  # a flock names no holder: the lock file, and the timeout
        held_by = rf"after 0.5 s waiting for the build of {key}: .* lock file \S*/locks/{key}.lock"
    with pytest.raises(LockTimeoutError, match=held_by):
        cache.get_or_build(source, SPEC)
    os.kill(procs[0].pid, signal.SIGKILL)
    procs[0].wait(timeout=30)
    status = cache.status(key)
    assert status["status"] == "interrupted" and status["progress"] == half
    assert cache.get(key) is None and cache.list() == []  # the half-written store: never served
    with pytest.raises(StoreIncompleteError):
        open_store_info(cache.layout.building(key))
    path = cache.get_or_build(source, SPEC)  # the dead builder's lock or claim died with it
    assert str(path) == f"{cache_root}/stores/{key}" and open_store_info(path).num_valid == 12
    assert open_store_info(path).attrs["complete"]
    assert [line.split()[0] for line in read_log(log)] == [str(procs[0].pid), str(os.getpid())]
    assert cache.status(key)["status"] == "ready"
