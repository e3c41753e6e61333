"""16-bit grey sources and 1-channel stores: every strategy serves the stored form, or says why not.

The vision review: ``benchmarks doctor`` and ``run`` crashed on X-rays built with ``--bit-depth
16`` and on ``--channels 1`` stores (the classic crop made a Pillow ``L``/``RGB`` image of
``uint16`` pixels), the report named 3 channels for a 1-channel store, and the segmentation and
detection models took 3 channels whatever the store held. The sources here are real 16-bit grey
PNG files written by Pillow, a dozen small ones, and their stores ``precompute build`` builds in
this process.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from benchmarks.cli import bench
from benchmarks.harness.run import DEFAULT_STRATEGIES
from benchmarks.harness.sources import plan_source
from benchmarks.harness.workloads import choose
from benchmarks.harness.workloads.crops import crop_pixels
from benchmarks.harness.workloads.items import decoded_values
from tests.benchmarks.kinds import KindSource
from tests.benchmarks.test_kinds import serve

WIDE = {"size": 24, "bit_depth": 16, "channels": 1}
SERVES = {"workers", "precompute", "tf-native", "tf-store"}  # the others: not applicable
PIXELS = (-2.2, 2.7)  # (0 - mean) / std .. (255 - mean) / std of the ImageNet normalisation


def _scan(rng: np.random.Generator, h: int, w: int, level: int) -> np.ndarray:
    """A 16-bit grey scan: a ramp around ``level`` over most of the 16-bit range, and noise."""
    ramp = np.linspace(-12000, 12000, w)[None, :] + rng.normal(0, 800, (h, w))
    return np.clip(level + ramp, 0, 65535).astype(np.uint16)


def _build(data: Path, out: Path, options: dict[str, Any]) -> KindSource:
    from precompute.cli import main as precompute

    k = KindSource("wide", str(data), options, out, 4)
    precompute(["build", k.data, "--out", str(out), *k.flags, "--quiet",
                "--runner", "sequential"])  # fmt: skip
    return k


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> KindSource:
    """Two class folders of 16-bit grey PNGs (bright and dark scans), stored 16-bit grey."""
    root = tmp_path_factory.mktemp("wide")
    rng = np.random.default_rng(0)
    for i in range(12):
        cls = "bright" if i % 2 else "dark"
        (root / "scans" / cls).mkdir(parents=True, exist_ok=True)
        pixels = _scan(rng, 30 + i, 40 + 2 * i, 45000 if i % 2 else 20000)
        Image.fromarray(pixels).save(root / "scans" / cls / f"s{i:02d}.png")
    return _build(root / "scans", root / "scans.zarr", WIDE)


@pytest.fixture(scope="module")
def ceph(tmp_path_factory: pytest.TempPathFactory) -> KindSource:
    """A landmarks manifest of 16-bit grey PNGs (the review's X-rays), stored 16-bit grey."""
    root = tmp_path_factory.mktemp("ceph")
    (root / "img").mkdir()
    rng, rows = np.random.default_rng(1), []
    for i in range(12):
        h, w = 40 + i, 48 + i
        pixels = _scan(rng, h, w, 20000)
        points = [[float(rng.uniform(4, w - 4)), float(rng.uniform(4, h - 4))] for _ in range(3)]
        for x, y in points:
            pixels[int(y) - 1 : int(y) + 2, int(x) - 1 : int(x) + 2] = 65000
        Image.fromarray(pixels).save(root / f"img/x{i:02d}.png")
        rows.append({"image": f"img/x{i:02d}.png", "keypoints": json.dumps(points)})
    with open(root / "ceph.csv", "w", newline="") as f:
        out = csv.DictWriter(f, ["image", "keypoints"])
        out.writeheader()
        out.writerows(rows)
    return _build(root / "ceph.csv", root / "ceph.zarr", WIDE)


def test_the_classic_crop_keeps_16_bits_and_normalises_as_8(scans: KindSource) -> None:
    """A 16-bit grey crop equals the crop of its 8-bit narrowing to within a step of 8 bits."""
    plan = plan_source(scans.data, scans.spec())
    wide = decoded_values(plan, 3)["image"]
    assert wide.dtype == np.uint16 and wide.shape[2] == 1 and int(wide.max()) > 255
    narrow = ((wide.astype(np.int64) * 2 + 257) // 514).astype(np.uint8)
    box = (3, 2, 30, 25)
    for pixels in (wide, np.repeat(wide, 3, axis=2)):  # one channel, and three at 16 bits
        got = crop_pixels(pixels, box, 16, flip=True)
        ref = crop_pixels(narrow if pixels.shape[2] == 1 else np.repeat(narrow, 3, 2), box, 16,
                          flip=True)  # fmt: skip
        assert got.shape == (pixels.shape[2], 16, 16) and got.dtype == np.float32
        assert np.abs(got - ref).max() < 0.03  # 8 bits round to 1/255 of the range: ~0.017
        assert got.std() > 0.1  # the ramp survives: not flattened to one value


SLOW = {"tf-native"}  # TensorFlow's first pipeline: seconds


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in DEFAULT_STRATEGIES],
)
def test_every_strategy_serves_the_stored_grey_16_bits(scans: KindSource, name: str) -> None:
    """One channel, normalised; the model consumer trains on it; or not applicable, saying why."""
    res = serve(scans, name)
    if res["status"] == "unavailable":
        pytest.skip(res["reason"])
    if name not in SERVES:
        assert res["status"] == "not applicable", res
        return
    assert res["status"] == "ok", res
    x, y = torch.cat([b[0] for b in res["batches"]]), torch.cat([b[1] for b in res["batches"]])
    assert x.shape == (12, 1, 24, 24) and x.dtype == torch.float32
    assert PIXELS[0] - 0.01 < float(x.min()) and float(x.max()) < PIXELS[1] + 0.01
    bright = x[y == 0].mean() > x[y == 1].mean()  # classes sorted: bright 0, dark 1
    assert bright, name  # the 16-bit levels reach the batch (not clipped to 8 bits' top)
    net, loss = choose(plan_source(scans.data, scans.spec())).consumer_model()
    assert torch.isfinite(loss(net(x[:4]), y[:4]))


def test_dali_and_memmap_say_why_not(scans: KindSource) -> None:
    for name in ("gpu-decode", "precompute-dali", "memmap"):
        res = serve(scans, name)
        if res["status"] != "unavailable":
            assert res["status"] == "not applicable" and res["reason"], res
    res = serve(scans, "gpu-decode")
    if res["status"] != "unavailable":
        assert "1 channel, 16-bit" in res["reason"]


def test_doctor_on_16_bit_xrays_names_their_form(ceph: KindSource) -> None:
    """The review's crash: doctor on 16-bit X-ray landmarks, with and without the store."""
    argv = ["doctor", "--data", ceph.data, *ceph.flags, "--max-files", "6"]
    for extra in ([], ["--store", str(ceph.store)]):
        res = CliRunner().invoke(bench, [*argv, *extra])
        assert res.exit_code == 0, res.output
        assert "(stored sample: image 24 x 24 px, 1 channel, 16-bit)" in res.output
        assert "  gpu-decode:" not in res.output  # DALI's graphs decode 3 channels, 8 bits
        assert "  workers:" in res.output
    assert "the store holds image uint16 [24, 24, 1], keypoints float32 [3, 3]" in res.output


@pytest.mark.slow
def test_run_on_16_bit_xrays_reports_one_channel(ceph: KindSource, tmp_path: Path) -> None:
    argv = ["run", "--data", ceph.data, *ceph.flags, "--store", str(ceph.store), "--out",
            str(tmp_path), "--epochs", "1", "--batch-size", "4", "--workers", "0",
            "--warmup-steps", "0", "--strategies", "workers,precompute,gpu-decode"]  # fmt: skip
    res = CliRunner().invoke(bench, argv)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text())
    status = {s["name"]: s["status"] for s in report["strategies"]}
    assert status["workers"] == status["precompute"] == "ok", report["strategies"]
    assert status["gpu-decode"] in ("not applicable", "unavailable")
    assert report["workload"]["stored"] == "image 24 x 24 px, 1 channel, 16-bit"
    assert report["workload"]["batch"].startswith("image float32 [B, 1, 24, 24] normalised")
    md = (tmp_path / "report.md").read_text()
    assert "stored sample image 24 x 24 px, 1 channel, 16-bit" in md
    assert "[B, 3, 24, 24]" not in md


@pytest.mark.parametrize("kind", ["masks", "boxes"])
def test_segmentation_and_detection_train_on_one_channel(kind: str, tmp_path: Path) -> None:
    """``--channels 1``: the workers serve one channel and the model takes it (it took 3)."""
    from benchmarks.examples.detection import make_shapes
    from benchmarks.fields_data import make_segmentation
    from benchmarks.harness.strategies import RunConfig, get_strategy

    if kind == "masks":
        data = make_segmentation(tmp_path / "seg", 8, (40, 56))
        options: dict[str, Any] = {"size": 32, "mask_classes": 4, "channels": 1}
    else:
        data = make_shapes(tmp_path / "det", 8, 0)
        options = {"size": 32, "images": str(tmp_path / "det/images"), "channels": 1}
    spec = KindSource(kind, str(data), options, tmp_path / "none", 4).spec()
    cfg = RunConfig(str(data), None, 4, 0, 32, 0, "cpu", spec=spec)
    source = get_strategy("workers").open(cfg)
    try:
        x, y = next(iter(source.epoch(0)))
    finally:
        source.close()
    assert x.shape == (4, 1, 32, 32)
    assert cfg.workload.served().startswith("image float32 [B, 1, 32, 32] normalised")
    net, loss = cfg.workload.consumer_model()
    assert torch.isfinite(loss(net(x), y))
