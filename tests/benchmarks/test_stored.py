"""What a stored sample is in the reports, per kind, and what a read of one weighs.

The speech review: doctor said "(size 64)" and "stored at 224" of an audio store, and the
run report "output 64 px" of log-mel clips; the seg review: doctor's read bound of a store
took the bytes of ``--size`` (the spec), not those of the store it read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from benchmarks.audio_data import make_audio_dataset
from benchmarks.cli import bench
from benchmarks.harness.run import run_benchmark
from benchmarks.harness.strategies import STRATEGIES, Strategy, register

AUDIO = ["--clip-seconds", "1.0", "--features", "logmel"]


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from precompute.cli import main as precompute

    root = tmp_path_factory.mktemp("stored")
    data = make_audio_dataset(root / "clips", 8, 2, 0, (0.8, 1.2), formats=(0,))
    store = root / "store.zarr"
    precompute(["build", str(data), "--out", str(store), *AUDIO, "--quiet",
                "--runner", "sequential"])  # fmt: skip
    return data, store


@pytest.fixture
def no_op() -> Iterator[str]:
    class Source:
        num_samples = 8

        def epoch(self, epoch: int) -> Iterator[Any]:
            yield torch.zeros(4, 64, 91), torch.zeros(4, dtype=torch.int64)

        def close(self) -> None:
            pass

    @register
    class NoOp(Strategy):
        name = "test-no-op"

        def open(self, cfg: Any) -> Source:
            return Source()

    yield NoOp.name
    del STRATEGIES[NoOp.name]


def test_an_audio_runs_report_says_clips_and_frames_not_pixels(
    audio: tuple[Path, Path], tmp_path: Path, no_op: str
) -> None:
    from precompute.cli import spec_from_options

    data, _ = audio
    spec = spec_from_options(None, {"clip_seconds": 1.0, "features": "logmel"}, str(data))
    report, paths = run_benchmark(str(data), tmp_path, strategies=[no_op], epochs=1,
                                  batch_size=4, spec=spec)  # fmt: skip
    stored = "audio: 1 s clips at 16000 Hz, log-mel 64 x 101 (n_mels x frames)"
    assert report["workload"]["stored"] == stored
    assert report["workload"]["stored_fields"] == "audio float16 [64, 101], label int64"
    md = paths["md"].read_text()
    assert f"batch size 4, stored sample {stored}, " in md
    assert " px" not in md


def test_doctor_names_an_audio_sample_by_its_kind(audio: tuple[Path, Path]) -> None:
    data, store = audio
    argv = ["doctor", "--data", str(data), *AUDIO, "--store", str(store), "--max-files", "4"]
    res = CliRunner().invoke(bench, argv)
    assert res.exit_code == 0, res.output
    assert "(stored sample: audio: 1 s clips at 16000 Hz, log-mel 64 x 101" in res.output
    assert "the store holds audio float16 [64, 101], label int64)" in res.output
    assert "size 64" not in res.output and "stored at" not in res.output


def test_doctor_reads_a_store_at_its_own_bytes_per_sample(tiny_data: Any, tiny_store: Any) -> None:
    """A store built at 32 px, asked about with --size 16: the store's bytes decide."""
    argv = ["doctor", "--data", str(tiny_data), "--store", str(tiny_store), "--size", "16"]
    doc = json.loads(CliRunner().invoke(bench, [*argv, "--max-files", "4", "--json"]).output)
    files = [p for p in tiny_store.rglob("*") if p.is_file() and p.suffix != ".json"]
    per = sum(p.stat().st_size for p in files) / 48  # every array's files over 48 samples
    assert per > 32 * 32 * 3  # the 32 px image alone (16 px would be a quarter of it)
    assert doc["bytes_per_sample"] == {
        "bytes": per,
        "from": "the store's files over its 48 samples (image raw 3.0 KiB, label raw 11 B)",
    }
    read = doc["store_read"]["mb_per_s"]
    bound = f"min({read * 1e6 / round(per):.0f} read bound"
    assert doc["feed_rates"]["precompute"]["arithmetic"].startswith(bound)


@pytest.fixture(scope="module")
def jpeg_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Class folders and their store built with ``--codec image=jpeg:90``."""
    from precompute.cli import main as precompute
    from precompute.sample import make_sample_dataset

    root = tmp_path_factory.mktemp("jpeg")
    data = make_sample_dataset(root / "images", num_images=12, num_classes=2,
                               size_range=(40, 56), seed=4)  # fmt: skip
    store = root / "store.zarr"
    precompute(["build", str(data), "--out", str(store), "--size", "32", "--codec",
                "image=jpeg:90", "--quiet", "--runner", "sequential"])  # fmt: skip
    return data, store


def test_doctor_names_a_coded_stores_codecs_and_reads_its_bytes(
    jpeg_store: tuple[Path, Path],
) -> None:
    """The vision review: a JPEG-coded --store was reported as raw (and advised to stay raw)."""
    from precompute.format.layout import open_store_info
    from precompute.format.storecheck import array_bytes
    from precompute.format.summary import store_summary

    data, store = jpeg_store
    argv = ["doctor", "--data", str(data), "--size", "32", "--store", str(store),
            "--max-files", "6"]  # fmt: skip
    doc = json.loads(CliRunner().invoke(bench, [*argv, "--json"]).output)
    info = open_store_info(str(store))
    found = array_bytes(
        info.path, info.layout, [f.name for f in info.fields if f.name in info.layout.arrays]
    )
    inspected = {a.name: a.codec for a in found}
    assert inspected["image"].startswith("jpeg:90") and inspected["label"] == "raw"
    assert f"storage    image: {inspected['image']}, " in store_summary(str(store))
    got = {a["field"]: a["codec"] for a in doc["store"]["arrays"]}
    assert got == inspected
    files = [p for p in store.rglob("*") if p.is_file() and p.suffix != ".json"]
    per = sum(p.stat().st_size for p in files) / 12
    assert per < 32 * 32 * 3 / 2  # coded: well under the raw image's bytes
    assert doc["bytes_per_sample"]["bytes"] == per
    assert f"image {inspected['image']} " in doc["bytes_per_sample"]["from"]
    given = doc["codec_advice"]["store"]
    assert given["coded"] == {"image": inspected["image"]}
    assert given["read_per_s"] == pytest.approx(doc["store_read"]["mb_per_s"] * 1e6 / per)
    text = CliRunner().invoke(bench, argv).output
    assert f"store's fields (its metadata): image {inspected['image']} " in text
    assert f"your store (--store): image {inspected['image']} " in text
    assert "keep the store raw" not in text


def test_a_runs_report_names_the_given_stores_codecs(
    jpeg_store: tuple[Path, Path], tmp_path: Path
) -> None:
    from precompute.cli import spec_from_options

    data, store = jpeg_store
    spec = spec_from_options(None, {"size": 32, "codec": "image=jpeg:90"}, str(data))
    report, paths = run_benchmark(str(data), tmp_path, store=str(store), strategies=["precompute"],
                                  epochs=1, batch_size=4, workers=0, spec=spec)  # fmt: skip
    assert report["strategies"][0]["status"] == "ok", report["strategies"]
    codecs = report["build"]["codecs"]
    assert codecs.startswith("image jpeg:90:") and ", label raw " in codecs
    assert f"- store `{store}` (given), per sample {codecs}: build time" in paths["md"].read_text()
