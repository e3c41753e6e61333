"""A ``--clips all`` audio build killed with SIGKILL mid-way, then resumed: identical store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from benchmarks.audio_data import make_audio_dataset
from precompute.job import build
from precompute.spec import BuildSpec
from tests.processes import kill_after_first_shard

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FIELDS = [
    {"name": "audio", "kind": "audio",
     "options": {"clip_seconds": 0.5, "clips": "all", "hop_seconds": 0.25}},
    {"name": "label", "kind": "label"},
]  # fmt: skip
SPEC = {"size": 8, "shard_samples": 4, "chunk_samples": 2, "seed": 4, "fields": FIELDS}
ARRAYS = ("audio", "audio.length", "audio.start", "audio.truncated", "label", "valid", "key")


def _arrays(out: Path) -> dict[str, np.ndarray]:
    return {n: np.asarray(zarr.open_array(str(out / n), mode="r")[:]) for n in ARRAYS}


def test_kill_9_then_resume_gives_the_same_windows(ray_local: None, tmp_path: Path) -> None:
    src = make_audio_dataset(tmp_path / "src", 30, 3, 5, (1.0, 2.5))
    out = tmp_path / "killed"
    # killed in a sequential child (the shards are the same whichever runner writes them),
    # resumed and compared on Ray
    done = kill_after_first_shard(src, out, SPEC, wait_s=240)
    spec = BuildSpec.from_dict(SPEC)
    attrs = build(str(src), str(out), spec, progress=False)
    assert attrs["report"]["shards_resumed"] >= done
    assert attrs["report"]["shards_built"] >= 1, "the kill must land mid-build"
    clean = build(str(src), str(tmp_path / "clean"), spec, progress=False)
    assert attrs["num_valid"] == clean["num_valid"] > 30  # windows: more samples than files
    got, want = _arrays(out), _arrays(tmp_path / "clean")
    for name in ARRAYS:
        np.testing.assert_array_equal(got[name], want[name])
