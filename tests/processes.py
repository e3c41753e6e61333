"""Process helpers shared by the tests that check what outlives a killed driver or server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from precompute.format.layout import MARKER_DIR

REPO = Path(__file__).resolve().parents[1]


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The processes of ``procs`` still alive (a zombie has exited: not counted)."""
    alive = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_exited(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until ``procs`` have exited (a zombie has); return those still running then.

    Unlike ``psutil.wait_procs`` it does not wait for a zombie to be reaped by its parent.
    """
    deadline = time.monotonic() + timeout
    while (alive := running(procs)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def spawn_module(module: str, *args: object) -> subprocess.Popen[str]:
    """Start ``python -m module ARGS`` from the repository root, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


CHILD = """
import sys
from precompute import BuildSpec, build
build(sys.argv[1], sys.argv[2], BuildSpec.from_dict({spec!r}), progress=False,
      runner={runner!r})
"""


def _markers(out: Path) -> int:
    folder = out / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def kill_after_first_shard(
    src: Path,
    out: Path,
    spec: dict[str, Any],
    shards: int | None = None,
    runner: str = "sequential",
    wait_s: float = 120,
) -> int:
    """Start a build of ``src`` in a child, SIGKILL its process group once a shard is written.

    Returns the shards written when it died: at least 1, and fewer than ``shards`` if given.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(spec=spec, runner=runner), str(src), str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    deadline = time.monotonic() + wait_s
    while _markers(out) < 1:
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline, "child build made no progress"
        time.sleep(0.002)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    if child.stderr is not None:
        child.stderr.close()
    done = _markers(out)
    ok = done >= 1 and (shards is None or done < shards)
    assert ok, f"the child wrote {done} of {shards} shards before it died"
    return done
