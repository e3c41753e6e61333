"""``--size WxH``: the bench commands take every size ``precompute build`` takes.

The vision review: ``benchmarks doctor --size 256x192`` was refused (``--size`` took an integer
only), though ``precompute build --size 256x192`` builds such a store. The bench commands now
take the build's own ``--size`` option (its parser), and every strategy serves the frame
``[B, C, H, W]`` or says why it cannot (DALI's loaders produce squares).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from benchmarks.cli import bench
from benchmarks.harness.workloads.crops import crop_boxes, crop_pixels, crop_points
from precompute.sample import make_sample_dataset
from tests.benchmarks.kinds import KindSource
from tests.benchmarks.test_kinds import serve

FRAME = {"size": "40x24"}  # width 40, height 24


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> KindSource:
    from precompute.cli import main as precompute

    root = tmp_path_factory.mktemp("frames")
    data = make_sample_dataset(root / "images", num_images=12, num_classes=2,
                               size_range=(32, 48), seed=2)  # fmt: skip
    k = KindSource("frame", str(data), FRAME, root / "store.zarr", 4)
    precompute(["build", k.data, "--out", str(k.store), *k.flags, "--quiet",
                "--runner", "sequential"])  # fmt: skip
    return k


def test_the_classic_crops_map_onto_a_frame() -> None:
    """Points and boxes land in a 40 x 24 frame (x by the width, y by the height), flipped."""
    box = (10, 20, 30, 40)  # a 20 x 20 crop: x scaled by 2, y by 1.2
    points = np.array([[20.0, 30.0, 1.0], [29.0, 21.0, 1.0]], np.float32)
    got = crop_points(points, box, (24, 40), flip=False)
    np.testing.assert_allclose(got[:, :2], [[20.0, 12.0], [38.0, 1.2]], rtol=1e-6)
    flipped = crop_points(points, box, (24, 40), flip=True)
    np.testing.assert_allclose(flipped[:, 0], [20.0, 2.0], rtol=1e-6)
    rows = np.array([[15.0, 25.0, 25.0, 35.0, 1.0]], np.float32)
    np.testing.assert_allclose(crop_boxes(rows, box, (24, 40), False, 0.1, 2)[0],
                               [10.0, 6.0, 30.0, 18.0, 1.0], rtol=1e-6)  # fmt: skip
    pixels = np.zeros((50, 50, 3), np.uint8)
    assert crop_pixels(pixels, box, (24, 40), flip=False).shape == (3, 24, 40)


@pytest.mark.parametrize(
    "name",
    [
        "workers",
        "precompute",
        "precompute-dali",
        "gpu-decode",
        pytest.param("tf-native", marks=pytest.mark.slow),
    ],
)
def test_every_strategy_serves_the_frame_or_says_why_not(wide: KindSource, name: str) -> None:
    res = serve(wide, name)
    if res["status"] == "unavailable":
        pytest.skip(res["reason"])
    if name in ("precompute-dali", "gpu-decode"):  # DALI's loaders: squares only
        assert res["status"] == "not applicable", res
        assert "produces square outputs only, and --size 40x24" in res["reason"]
        return
    assert res["status"] == "ok", res
    x = torch.cat([b[0] for b in res["batches"]])
    assert x.shape == (12, 3, 24, 40) and x.dtype == torch.float32


def test_doctor_takes_the_builds_sizes(wide: KindSource) -> None:
    argv = ["doctor", "--data", wide.data, "--max-files", "4", "--json"]
    res = CliRunner().invoke(bench, [*argv, "--size", "40x24", "--store", str(wide.store)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["size"] == "40x24"
    assert doc["stored"] == "image 40 x 24 px, 3 channels, 8-bit"
    assert doc["store_loader"]["stored"] == "image uint8 [24, 40, 3], label int64"
    assert "gpu-decode" not in doc["feed_rates"]  # DALI's loaders: squares only
    for size in ("64x64", " 32 "):  # a square frame is its side, as the build has it
        res = CliRunner().invoke(bench, [*argv, "--size", size])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["size"] == int(size.strip().split("x")[0])
    bad = CliRunner().invoke(bench, [*argv, "--size", "40by24"])
    assert bad.exit_code == 2
    assert "--size must be a side S or WIDTHxHEIGHT (e.g. 224, 512x384)" in bad.output


def test_run_takes_a_frame(wide: KindSource, tmp_path: Path) -> None:
    argv = ["run", "--data", wide.data, "--size", "40x24", "--store", str(wide.store), "--out",
            str(tmp_path), "--epochs", "1", "--batch-size", "4", "--workers", "0",
            "--warmup-steps", "0", "--strategies", "workers,precompute"]  # fmt: skip
    res = CliRunner().invoke(bench, argv)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert [s["status"] for s in report["strategies"]] == ["ok", "ok"], report["strategies"]
    assert report["workload"]["batch"] == "image float32 [B, 3, 24, 40] normalised, label int64 [B]"
    assert report["workload"]["stored_fields"] == "image uint8 [24, 40, 3], label int64"
