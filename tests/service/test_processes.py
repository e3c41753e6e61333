"""Several real processes on one cache: a lease held by another process, on a cache folder and
in object storage (``cache_root``: local, S3, Azure Blob)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from precompute.storage.location import location
from service import Cache, StoreInUseError
from tests.processes import spawn_module
from tests.servers import wait_for
from tests.service.helpers import SPEC, make_source
from tests.service.worker import builder_for

WORKER = "tests.service.worker"  # the module each spawned process runs


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return make_source(tmp_path / "src")


def test_lease_in_another_process_blocks_eviction_until_it_dies(
    cache_root: str, tmp_path: Path, source: Path, procs: list[subprocess.Popen[str]]
) -> None:
    root, ready = cache_root, tmp_path / "ready"
    cache = Cache(root, builder=builder_for(root))
    path = cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    procs.append(spawn_module(WORKER, "lease", root, key, ready))
    wait_for(ready, procs[0], timeout=60.0)
    assert ready.read_text() == str(path)
    report = cache.gc(budget_bytes=0)
    assert report.evicted == () and report.skipped_leased == (key,)
    with pytest.raises(StoreInUseError):
        cache.remove(key)
    os.kill(procs[0].pid, signal.SIGKILL)  # the kernel drops its flock; its lease object's
    procs[0].wait(timeout=30)  # holder is a dead process of this host
    assert cache.gc(budget_bytes=0).evicted == (key,) and location(path).list() == {}
