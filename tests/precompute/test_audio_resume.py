"""A ``--clips all`` audio build killed with SIGKILL mid-way, then resumed: identical store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from benchmarks.audio_data import make_audio_dataset
from precompute.format.layout import MARKER_DIR
from precompute.job import build
from precompute.spec import BuildSpec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FIELDS = [
    {"name": "audio", "kind": "audio",
     "options": {"clip_seconds": 0.5, "clips": "all", "hop_seconds": 0.25}},
    {"name": "label", "kind": "label"},
]  # fmt: skip
SPEC = {"size": 8, "shard_samples": 4, "chunk_samples": 2, "seed": 4, "fields": FIELDS}
CHILD = """
import sys
from precompute import BuildSpec, build
build(sys.argv[1], sys.argv[2], BuildSpec.from_dict({spec!r}), progress=False)
"""
ARRAYS = ("audio", "audio.length", "audio.start", "audio.truncated", "label", "valid", "key")


def _markers(out: Path) -> int:
    folder = out / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def _arrays(out: Path) -> dict[str, np.ndarray]:
    return {n: np.asarray(zarr.open_array(str(out / n), mode="r")[:]) for n in ARRAYS}


def test_kill_9_then_resume_gives_the_same_windows(ray_local: None, tmp_path: Path) -> None:
    src = make_audio_dataset(tmp_path / "src", 30, 3, 5, (1.0, 2.5))
    out = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(spec=SPEC), str(src), str(out)],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while _markers(out) < 1:
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline, "child build made no progress"
        time.sleep(0.005)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    spec = BuildSpec.from_dict(SPEC)
    attrs = build(str(src), str(out), spec, progress=False)
    assert attrs["report"]["shards_resumed"] >= 1
    clean = build(str(src), str(tmp_path / "clean"), spec, progress=False)
    assert attrs["num_valid"] == clean["num_valid"] > 30  # windows: more samples than files
    got, want = _arrays(out), _arrays(tmp_path / "clean")
    for name in ARRAYS:
        np.testing.assert_array_equal(got[name], want[name])
