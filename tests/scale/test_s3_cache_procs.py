"""Real processes on one ``s3://`` cache: racing builders, a SIGKILLed builder's claim taken over.

Also the worker entry point of those processes (they inherit the test server's ``AWS_*``)::

    python -m tests.scale.test_s3_cache_procs race ROOT SRC LOG GO READY
    python -m tests.scale.test_s3_cache_procs hang ROOT SRC LOG STARTED
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.format import open_store_info
from service import Cache, ServiceError
from tests.processes import spawn_module
from tests.scale.test_s3_cache import hanging_s3_builder, s3_builder
from tests.servers import wait_for
from tests.service.helpers import SPEC, make_source, read_log
from tests.service.serving import serve_process

WORKER = "tests.scale.test_s3_cache_procs"  # the module each spawned process runs


def test_two_processes_build_once(
    bucket: str, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    source, log, go = make_source(tmp_path / "src"), tmp_path / "log", tmp_path / "go"
    root = f"{bucket}/cache"
    readies = [tmp_path / f"ready{i}" for i in range(2)]
    procs.extend(spawn_module(WORKER, "race", root, source, log, go, ready) for ready in readies)
    for ready, proc in zip(readies, procs, strict=True):
        wait_for(ready, proc)
    go.write_text("go")
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outs.append(json.loads(out)["path"])
    cache = Cache(root)
    key = cache.key_for(source, SPEC)
    assert outs == [f"{root}/stores/{key}"] * 2
    assert len(read_log(log)) == 1  # one build between the two processes
    assert [e.key for e in cache.list()] == [key]


def test_a_killed_builders_claim_is_taken_over(
    bucket: str, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    source, log, started = make_source(tmp_path / "src"), tmp_path / "log", tmp_path / "started"
    root = f"{bucket}/cache"
    procs.append(spawn_module(WORKER, "hang", root, source, log, started))
    wait_for(started, procs[0])
    cache = Cache(root, builder=s3_builder(log), lock_timeout=0.5)
    key = cache.key_for(source, SPEC)
    assert cache.status(key)["status"] == "building"
    assert cache.status(key)["progress"] == {"shards_done": 1, "shards_total": 2, "fraction": 0.5}
    with pytest.raises(
        ServiceError, match=rf"waiting for the build of {key} by .* pid {procs[0].pid}"
    ):
        cache.get_or_build(source, SPEC)  # a live builder holds the claim: wait, then time out
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    assert cache.status(key)["status"] == "interrupted"
    assert cache.get(key) is None  # the half-written store is never served
    path = cache.get_or_build(source, SPEC)  # takes the dead claim over, resumes, publishes
    assert str(path) == f"{root}/stores/{key}" and open_store_info(path).attrs["complete"]
    assert [line.split()[0] for line in read_log(log)] == ["hang", str(os.getpid())]
    assert cache.status(key)["status"] == "ready"


def test_serve_with_an_s3_cache_shares_it_with_other_processes(bucket: str, tmp_path: Path) -> None:
    import httpx

    source, root = make_source(tmp_path / "data" / "ds"), f"{bucket}/cache"
    key = Cache(root, builder=s3_builder()).get_or_build(source, SPEC).name  # built here
    args = ["--cache", root, "--source-root", tmp_path / "data"]
    with (
        serve_process(tmp_path / "server.log", *args) as (_, url),
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        hit = c.post("/stores", json={"source": "ds", "spec": SPEC})  # no build: a hit
        assert hit.status_code == 200 and hit.json()["path"] == f"{root}/stores/{key}", hit.text
        assert [s["key"] for s in c.get("/stores").json()["stores"]] == [key]
        assert c.delete(f"/stores/{key}").status_code == 200
    assert Cache(root).list() == []  # removed for every instance


def _main(argv: list[str]) -> None:
    cmd, root, src, log = argv[0], argv[1], argv[2], Path(argv[3])
    if cmd == "race":
        go, ready = Path(argv[4]), Path(argv[5])
        cache = Cache(root, builder=s3_builder(log, delay=1.0))
        ready.write_text("ready")  # imported and set up: only the race itself is left
        wait_for(go)
        print(json.dumps({"path": str(cache.get_or_build(src, SPEC))}), flush=True)
    elif cmd == "hang":
        Cache(root, builder=hanging_s3_builder(Path(argv[4]), log)).get_or_build(src, SPEC)
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    _main(sys.argv[1:])
