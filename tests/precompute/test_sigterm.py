"""SIGTERM (a batch scheduler's stop) ends a build as Ctrl-C does: exit 143, one line, resumable.

A real ``precompute build`` process on a real local Ray of its own, stopped by SIGTERM once its
first shard is written (issue 42, item 7: Ray's driver handler had ended it in SIGABRT with a
native stack dump).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from precompute.format.layout import MARKER_DIR, open_store_info
from precompute.format.verify import verify_store
from precompute.sample import make_sample_dataset
from tests.processes import REPO

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _markers(out: Path) -> int:
    folder = out / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def _build(src: Path, out: Path, runner: str) -> subprocess.Popen[str]:
    flags = ["--size", "32", "--shard-samples", "4", "--chunk-samples", "4", "--runner", runner]
    return subprocess.Popen(
        [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", str(out), *flags],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


@pytest.mark.parametrize("runner", ["ray", "auto"])
def test_sigterm_ends_a_build_like_ctrl_c(tmp_path: Path, runner: str) -> None:
    src = make_sample_dataset(tmp_path / "src", 240, size_range=(200, 320))
    out = tmp_path / "s"
    child = _build(src, out, runner)
    deadline = time.monotonic() + 240
    while _markers(out) < 1:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the build wrote no shard"
        time.sleep(0.01)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    assert child.returncode == 143, err
    assert lines[-1] == "precompute: aborted (SIGTERM)", err
    assert not [ln for ln in lines if not ln.startswith(("precompute", "\x1b"))], err  # one line
    written = _markers(out)
    assert 1 <= written < 60  # stopped part-way
    again = _build(src, out, runner)  # the same command resumes the store
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    info = open_store_info(out)
    assert info.report["shards_resumed"] >= written and info.num_valid == 240
    assert verify_store(out) == []
