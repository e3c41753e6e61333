"""A cache build killed with SIGKILL mid-way, on local disk and in object storage (S3 and Azure
Blob), then built again: the real builder (``precompute.job.build``, sequential runner: no Ray)
resumes the partial store from its shard markers, or wipes it when it is not this key's store;
either way the store is byte for byte the one a clean build writes (docs/service.md, "Crash
safety").

Also the worker entry point of the killed process (it inherits the test servers' settings)::

    python -m tests.service.test_killed_builds build ROOT SRC
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from precompute import job
from precompute.format.layout import ATTR_KEY, MARKER_DIR, open_store_info
from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec
from precompute.storage.location import is_url, location
from service import Cache
from service.cache.builders import Builder, BuildRequest
from tests.objectservers import PROTOCOLS, new_bucket, objects_under
from tests.processes import spawn_module
from tests.service.helpers import SPEC

WORKER = "tests.service.test_killed_builds"
NUM = 160  # 20 shards of 8


def sequential_builder(calls: list[str] | None = None) -> Builder:
    """The cache's real build, ``precompute.job.build``, run in this process without Ray."""

    def build(request: BuildRequest) -> None:
        if calls is not None:
            calls.append(request.key)
        job.build(
            str(request.source),
            str(request.out),
            request.spec,
            progress=False,
            content_hash=request.content_hash,
            runner="sequential",
        )

    return build


def _files(store: Path | str) -> dict[str, bytes]:
    """Every file of the store but the markers and the lock; on disk or in object storage."""
    if is_url(store):
        read = objects_under(str(store))
    else:
        root = Path(store)
        read = {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }
    return {n: b for n, b in read.items() if not n.startswith(f"{MARKER_DIR}/")}


def store_bytes(store: Path | str) -> dict[str, str]:
    """sha256 of each array file; the group's ``zarr.json`` less its build report."""
    import hashlib

    files = _files(store)
    group = json.loads(files.pop("zarr.json"))
    group["attributes"][ATTR_KEY].pop("report", None)
    out = {n: hashlib.sha256(b).hexdigest() for n, b in sorted(files.items())}
    out["zarr.json less the report"] = json.dumps(group, sort_keys=True)
    return out


def _put(path: Path | str, data: bytes) -> None:
    if is_url(path):
        location(path).write_bytes(data)
    else:
        Path(path).write_bytes(data)


def _spoil_fingerprint(store: Path | str) -> None:
    """Make the partial store another source's: it must be wiped, not resumed."""
    group_url = f"{store}/zarr.json"
    doc = json.loads(_files(store)["zarr.json"])
    doc["attributes"][ATTR_KEY]["source_fingerprint"] = "another-source"
    _put(group_url, json.dumps(doc).encode())


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("killed") / "src"
    return make_sample_dataset(root, num_images=NUM, num_classes=3, size_range=(96, 256), seed=4)


@pytest.fixture(scope="module")
def clean(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("clean") / "store"
    job.build(str(source), str(out), BuildSpec.from_dict(SPEC), progress=False, runner="sequential")
    return store_bytes(out)


def _cache_root(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "local":
        return str(tmp_path / "cache")
    return f"{new_bucket(request, backend, 'nostall-killed')}/cache"  # in a new bucket


def _progress(cache: Cache, key: str) -> dict[str, Any]:
    return dict(cache.status(key).get("progress") or {"shards_done": 0})


def _kill_mid_build(root: str, source: Path, procs: list[subprocess.Popen[str]]) -> int:
    """Start a cache build in another process, SIGKILL it once a shard is done; return the
    shards it finished."""
    cache = Cache(root)
    key = cache.key_for(source, SPEC)
    procs.append(spawn_module(WORKER, "build", root, source))
    deadline = time.monotonic() + 240
    while _progress(cache, key)["shards_done"] < 1:
        assert procs[-1].poll() is None, procs[-1].communicate()[1]
        assert time.monotonic() < deadline, "the build made no progress"
        time.sleep(0.01)
    procs[-1].send_signal(signal.SIGKILL)
    procs[-1].wait()
    assert cache.status(key)["status"] == "interrupted"
    done = _progress(cache, key)
    assert 1 <= done["shards_done"] < done["shards_total"], "the kill must land mid-build"
    assert cache.get(key) is None  # a partial store is never served
    return int(done["shards_done"])


@pytest.mark.parametrize("backend", ["local", *PROTOCOLS])
@pytest.mark.parametrize("partial", ["resumed", "wiped"])
def test_a_killed_cache_build_is_resumed_or_wiped_to_the_clean_stores_bytes(
    backend: str,
    partial: str,
    source: Path,
    clean: dict[str, str],
    tmp_path: Path,
    procs: list[subprocess.Popen[str]],
    request: pytest.FixtureRequest,
) -> None:
    root = _cache_root(backend, tmp_path, request)
    done = _kill_mid_build(root, source, procs)
    calls: list[str] = []
    cache = Cache(root, builder=sequential_builder(calls))
    key = cache.key_for(source, SPEC)
    if partial == "wiped":
        _spoil_fingerprint(cache.layout.building(key))
    path = cache.get_or_build(source, SPEC)
    report = open_store_info(path).report
    assert calls == [key]
    resumed = done if partial == "resumed" else 0
    assert (report["shards_resumed"], report["shards_built"]) == (resumed, NUM // 8 - resumed)
    assert store_bytes(path) == clean  # byte for byte the clean build's store
    assert cache.status(key)["status"] == "ready"


def _main(argv: list[str]) -> None:
    cmd, root, src = argv
    if cmd != "build":
        raise SystemExit(f"unknown command {cmd!r}")
    Cache(root, builder=sequential_builder()).get_or_build(src, SPEC)


if __name__ == "__main__":
    _main(sys.argv[1:])
