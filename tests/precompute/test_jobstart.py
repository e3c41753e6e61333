"""What a build does before its shards (precompute.pipeline.start), with real builds in
subprocesses.

Each build runs in its own interpreter with no Ray initialised (the session's ``ray_local``
would otherwise be reused), against a real address where nothing listens.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from precompute import BuildSpec, build
from tests.processes import REPO

pytestmark = [pytest.mark.ray]

SPEC: dict[str, Any] = {"size": 16, "shard_samples": 8, "chunk_samples": 4}

# A build against ADDRESS; prints its error, the listing threads still alive right after it,
# and how the listing ended. Ray Data is imported first so the listing starts walking at once.
BUILD = """
import json, sys, threading
import ray.data
import precompute.job as job
from precompute import BuildSpec, build
from precompute.errors import PrecomputeError

handles = []
start = job.in_background
job.in_background = lambda *a: handles.append(start(*a)) or handles[-1]  # kept, not replaced
try:
    attrs = build(sys.argv[1], sys.argv[2], BuildSpec(**json.loads(sys.argv[4])),
                  progress=False, ray_address=sys.argv[3])
    error = None
except PrecomputeError as exc:
    error = f"{type(exc).__name__}: {exc}"
alive = [t.name for t in threading.enumerate() if t.name == "precompute-listing"]
done = getattr(handles[0], "_future", handles[0])  # (a plain Future before the listing stopped)
ended = done.exception() if done.done() else "running"
print(json.dumps({"error": error, "alive": alive, "ended": type(ended).__name__}))
"""


def _dead_address() -> str:
    """A ``127.0.0.1:PORT`` where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _build(src: Path, out: Path, address: str, **spec: object) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(src), str(out), address, json.dumps({**SPEC, **spec})],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


@pytest.fixture(scope="module")
def large_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A class-folder tree of 24,000 (empty) image files: its listing takes a while."""
    root = tmp_path_factory.mktemp("large")
    for c in range(24):
        folder = root / f"class{c:02d}"
        folder.mkdir()
        for i in range(1000):  # os.open: a fifth of Path.touch's CPU, over 24,000 files
            os.close(os.open(folder / f"{i:04d}.jpg", os.O_CREAT | os.O_WRONLY, 0o644))
    return root


def test_a_ray_that_fails_to_start_stops_the_listing_first(
    large_source: Path, tmp_path: Path
) -> None:
    address = _dead_address()
    row = _build(large_source, tmp_path / "s", address)
    assert row["error"] is not None
    assert row["error"].startswith(f"ClusterError: cannot start or reach Ray at {address}")
    assert row["alive"] == []  # no thread reads the source after the build has failed
    assert row["ended"] == "ListingStopped"  # stopped mid-way, not left to finish
    assert not (tmp_path / "s").exists()


def test_a_rerun_over_a_complete_store_starts_no_ray(
    ray_local: None, small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build(str(small_dataset), str(tmp_path / "s"), BuildSpec(**SPEC), progress=False)
    capsys.readouterr()
    build(str(small_dataset), str(tmp_path / "s"), BuildSpec(**SPEC))  # says so, not silent
    said = [s for s in capsys.readouterr().err.splitlines() if not s.startswith("note: ")]
    assert said[0] == f"precompute: {tmp_path / 's'}: complete already (the same source and spec)"
    assert said[1].startswith(f"built {tmp_path / 's'}: ") and len(said) == 2
    dead = _dead_address()  # opening Ray there would be a ClusterError
    assert _build(small_dataset, tmp_path / "s", dead)["error"] is None
    other = _build(small_dataset, tmp_path / "s", dead, seed=1)["error"]
    assert other is not None and other.startswith("StoreMismatchError: ")
