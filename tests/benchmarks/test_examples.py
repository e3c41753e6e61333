"""Runs of the README's examples at small settings: data written, stores built on Ray, a
Lightning model trained until it beats the example's own trivial baseline (the all-background
mask, the mean shape), as each example prints it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from precompute.format.layout import open_store_info
from tests.benchmarks.figures import assert_positive, figure_after
from tests.lazymodule import LazyModule

if TYPE_CHECKING:
    from benchmarks.examples import landmarks, segmentation
else:  # both import Lightning: imported by their tests, not at collection
    landmarks = LazyModule("benchmarks.examples.landmarks")
    segmentation = LazyModule("benchmarks.examples.segmentation")

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_session(ray_local: object) -> None:
    """The session's shared local Ray (tests/conftest.py): the examples' builds use it."""


def test_segmentation_example_beats_the_all_background_mask(
    ray_session: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = segmentation.main(["--quick", "--epochs", "3", "--work", str(tmp_path)])
    assert len(history) == 3
    model, background = history[-1]
    assert len(model) == len(background) == segmentation.CLASSES
    assert all(math.isfinite(d) and 0 <= d <= 1 for d in model + background)
    mean = sum(model) / segmentation.CLASSES
    assert mean > 2 * sum(background) / segmentation.CLASSES, history  # over the trivial mask
    info = open_store_info(tmp_path / "train.zarr")
    assert [f.kind for f in info.spec.fields] == ["image", "mask"] and info.num_valid == 24
    assert "val Dice per class" in capsys.readouterr().out


def test_landmark_example_beats_the_mean_shape(
    ray_session: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 120 steps of 8: the model first learns where each point sits on average, then beats it
    history = landmarks.main(["--quick", "--epochs", "60", "--work", str(tmp_path)])
    model, mean_shape = history[-1]
    assert math.isfinite(model) and 0 < mean_shape < 10  # pixels of the 64 px input
    assert model < 0.9 * mean_shape, history[-5:]  # under the mean-shape predictor's error
    info = open_store_info(tmp_path / "val.zarr")
    points = next(f for f in info.spec.fields if f.kind == "keypoints")
    assert points.options["points"] == landmarks.POINTS and info.num_valid == 8
    assert "held-out mean radial error" in capsys.readouterr().out


def test_bench_fields_prints_the_ratio_and_rss_rows(
    ray_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.suite import fields

    argv = ["--images", "16", "--batch", "4", "--size", "24", "--store-size", "32"]
    fields.main([*argv, "--runs", "1", "--rss-factor", "2"])
    out = capsys.readouterr().out
    for row in (fields.CLASSIC, fields.STORE):
        assert_positive(out, row, "samples/s")
    figure_after(out, f"ratio {fields.STORE} vs classic: ")
    for n in (16, 32):
        assert assert_positive(out, f"StoreLoader epoch over {n} samples", "peak_rss_mib")[0] > 50
    figure_after(out, "peak RSS ratio 32 / 16 samples: ")
