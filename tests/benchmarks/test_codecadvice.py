"""doctor's codec advice on real files of every kind: bytes measured per field, I/O-bound or not.

The sources are real files (JPEGs in class folders, PNG image/mask pairs, WAV/FLAC/OGG clips),
assembled as the build stores them; the advice's figures are the measured bytes, checked against
what a build with the advised codec writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from benchmarks.audio_data import make_audio_dataset
from benchmarks.codecadvice import GAIN, advice_lines, codec_advice, measure_fields
from benchmarks.fields_data import make_segmentation
from benchmarks.harness.doctor import sample_bytes
from benchmarks.harness.sources import plan_source
from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("advice")
    return {
        "images": make_sample_dataset(
            root / "images", num_images=16, num_classes=2, size_range=(64, 96), seed=1
        ),
        "seg": make_segmentation(root / "seg", 12, (64, 96)),
        "audio": make_audio_dataset(root / "audio", 10, 2, 0, (0.6, 1.2)),
    }


def _codecs(measured: dict[str, Any], field: str) -> dict[str, dict[str, Any]]:
    row = next(r for r in measured["fields"] if r["field"] == field)
    return {c["codec"]: c for c in row["codecs"]}


def _advise(measured: dict[str, Any], plan: Any, read_mb_s: float, **kw: Any) -> dict[str, Any]:
    return codec_advice(measured, read_mb_s, 20_000.0, threads=2, raw_total=sample_bytes(plan),
                        **kw)  # fmt: skip


def test_image_bytes_are_what_a_jpeg_build_writes_and_slow_storage_is_told_to_use_it(
    data: dict[str, Path], tmp_path: Path
) -> None:
    from precompute.job import build

    spec = BuildSpec(size=64, mode="center-crop", shard_samples=16, chunk_samples=16)
    plan = plan_source(str(data["images"]), spec)
    measured = measure_fields(plan, 16)
    assert measured["samples"] == 16 and measured["left_out"] == []
    image = _codecs(measured, "image")
    assert set(image) == {"jpeg:90", "zstd:3"}  # what the image kind takes, as tried
    assert image["jpeg:90"]["lossy"] and image["jpeg:90"]["decode_per_s"] > 0
    out = tmp_path / "jpeg.zarr"
    coded = BuildSpec.from_dict({**spec.to_dict(), "codecs": {"image": "jpeg:90"}})
    build(str(data["images"]), str(out), coded, progress=False, runner="sequential")
    shard = out / "image" / "c" / "0" / "0" / "0" / "0"
    stored = shard.stat().st_size - (16 + 4)  # one chunk: its bytes + crc32c, then the index
    assert image["jpeg:90"]["bytes"] * 16 == pytest.approx(stored)  # the build's own bytes
    slow = _advise(measured, plan, 20.0)  # 20 MB/s: 1,600 raw samples/s of 12 KiB
    assert slow["io_bound"] and slow["flag"] == "image=jpeg:90"
    assert slow["coded_per_s"] > 3 * slow["raw_per_s"]
    text = "\n".join(advice_lines({"measured": measured, "advice": slow, "storage": "s",
                                   "serve": "v"}))  # fmt: skip
    assert "raw is I/O-bound here" in text and "build with --codec image=jpeg:90" in text
    assert "label (label, 8 B raw): stays raw" in text
    fast = _advise(measured, plan, 5000.0)
    assert not fast["io_bound"] and fast["flag"] == "image=jpeg:90"
    assert "keep the store raw" in advice_lines({"measured": measured, "advice": fast,
                                                 "storage": "s", "serve": "v"})[-1]  # fmt: skip


def test_masks_take_zstd_only_and_gain_from_it(data: dict[str, Path]) -> None:
    plan = _spec_plan(data["seg"], size=64, mask_classes=4, chunk_samples=8)
    measured = measure_fields(plan, 12)
    mask = _codecs(measured, "mask")
    assert set(mask) == {"zstd:3"}  # the mask kind takes no lossy codec
    raw = next(r["raw_bytes"] for r in measured["fields"] if r["field"] == "mask")
    assert raw == 64 * 64 and raw / mask["zstd:3"]["bytes"] >= 5  # a few flat regions
    slow = _advise(measured, plan, 10.0)
    assert slow["codecs"] == {"image": "jpeg:90", "mask": "zstd:3"}
    assert slow["flag"] == "image=jpeg:90,mask=zstd:3"
    assert slow["coded_bytes"] < slow["raw_bytes"] / 5


def _spec_plan(src: Path, **options: Any) -> Any:
    """The plan of ``src`` with the spec ``precompute build`` makes of these flags."""
    from precompute.cli import spec_from_options

    return plan_source(str(src), spec_from_options(None, options, str(src)))


@pytest.mark.parametrize("features", ["waveform", "logmel"])
def test_audio_is_measured_under_zstd_and_kept_raw_where_it_gains_little(
    data: dict[str, Path], features: str
) -> None:
    plan = _spec_plan(data["audio"], clip_seconds=1.0, features=features)
    measured = measure_fields(plan, 10)
    audio = _codecs(measured, "audio")
    assert set(audio) == {"zstd:3"}
    ratio = (
        next(r["raw_bytes"] for r in measured["fields"] if r["field"] == "audio")
        / audio["zstd:3"]["bytes"]
    )
    assert 1.0 < ratio < GAIN  # synthetic tones and noise: a little, not enough
    slow = _advise(measured, plan, 1.0)
    assert slow["io_bound"] and slow["flag"] is None
    lines = advice_lines({"measured": measured, "advice": slow, "storage": "s", "serve": "v"})
    assert "no codec gains 1.5x on your data" in lines[-1]


def test_a_jpeg_field_decoded_on_the_gpu_costs_the_reader_threads_nothing(
    data: dict[str, Path],
) -> None:
    plan = plan_source(str(data["images"]), BuildSpec(size=64))
    measured = measure_fields(plan, 8)
    cpu = _advise(measured, plan, 20.0)
    gpu = _advise(measured, plan, 20.0, device_jpeg=True)
    assert cpu["decode_per_s"] > 0 and gpu["decode_per_s"] is None
    assert gpu["coded_per_s"] == pytest.approx(min(gpu["coded_read_per_s"], 20_000.0))


FLAGS = {
    "images": ["--size", "64"],
    "seg": ["--size", "64", "--mask-classes", "4"],
    "audio": ["--clip-seconds", "1", "--features", "waveform"],  # no log-mel options at all
}
FIELDS = {"images": {"image", "label"}, "seg": {"image", "mask"}, "audio": {"audio", "label"}}


@pytest.mark.parametrize("kind", ["images", "seg", "audio"])
def test_the_doctor_prints_and_returns_the_advice(data: dict[str, Path], kind: str) -> None:
    from benchmarks.cli import bench

    argv = ["doctor", "--data", str(data[kind]), "--max-files", "8", *FLAGS[kind]]
    res = CliRunner().invoke(bench, [*argv, "--json"])
    assert res.exit_code == 0, res.output
    whole = json.loads(res.output)
    doc = whole["codec_advice"]
    assert doc["measured"]["samples"] == 8 and doc["storage"].startswith("the source's files")
    assert "workers strategy's estimate" in doc["serve"]
    assert doc["advice"]["read_mb_per_s"] == pytest.approx(whole["read"]["mb_per_s"])
    assert doc["advice"]["serve_per_s"] == whole["feed_rates"]["workers"]["samples_per_s"]
    assert {r["field"] for r in doc["measured"]["fields"]} == FIELDS[kind]
    assert np.isfinite(doc["advice"]["raw_per_s"])
    text = CliRunner().invoke(bench, argv).output
    assert "codecs on your data (8 samples stored as the build would" in text
    assert "zstd:3" in text and "raw store:" in text
