import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from benchmarks.cli import bench
from benchmarks.errors import BenchConfigError
from benchmarks.harness.doctor import feed_rates
from benchmarks.harness.prepare_store import check_store_source
from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_sample_dataset
from precompute.sources.classes import fingerprint, list_source
from precompute.spec import BuildSpec


def store_of(data, out):
    """A store whose recorded source fingerprint is ``data``'s, as a build of it records."""
    src = list_source(str(data))
    images = np.zeros((len(src.items), 16, 16, 3), np.uint8)
    labels = np.array([label for _, label in src.items])
    write_store_from_arrays(
        out,
        images,
        labels,
        BuildSpec(size=16, shard_samples=16, chunk_samples=8),
        fingerprint=fingerprint(src),
    )
    return out


def test_doctor_measures_and_shows_the_arithmetic(tiny_data, tiny_store):
    res = CliRunner().invoke(
        bench,
        ["doctor", "--data", str(tiny_data), "--store", str(tiny_store), "--size", "32", "--json"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    images = [p for p in tiny_data.rglob("*") if p.is_file()]
    shards = [p for p in tiny_store.rglob("*") if p.is_file() and p.suffix != ".json"]
    image_shards = [p for p in shards if p.relative_to(tiny_store).parts[0] == "image"]
    assert doc["decode"]["samples"] == 48 and doc["decode"]["decode_per_s"] > 0
    assert doc["workload"] == "image classification"
    assert doc["read"]["files"] == len(images) == 48
    assert doc["read"]["bytes"] == sum(p.stat().st_size for p in images)
    assert len(image_shards) == 3  # 48 samples, 16 per shard; every array's shards are read
    assert doc["store_read"]["files"] == len(shards)
    assert doc["store_read"]["bytes"] == sum(p.stat().st_size for p in shards)
    assert doc["store_loader"]["samples"] == 48 and doc["store_loader"]["size"] == 32
    assert doc["store_loader"]["augment"].startswith("TrainAugment(32 px")
    precompute = doc["feed_rates"]["precompute"]["arithmetic"]
    assert "measured StoreLoader samples/s with TrainAugment" in precompute
    assert all("left out:" in v["arithmetic"] for v in doc["feed_rates"].values())
    assert set(doc["feed_rates"]) == {"workers", "precompute", "gpu-decode"}
    text = CliRunner().invoke(bench, ["doctor", "--data", str(tiny_data)]).output
    assert "feed rate each strategy could reach" in text
    assert "samples/s/core" in text and " x " in text


def test_feed_rate_arithmetic():
    dec = {"decode_per_s": 100.0, "pipeline_per_s": 50.0}
    read = {"mb_per_s": 120.0, "files_per_s": 1000.0}
    rates = feed_rates(dec, read, cores=9, size=100, has_gpu=False)
    assert rates["workers"]["samples_per_s"] == pytest.approx(450.0)  # 50/s x 9 workers
    assert "x 9 cores (9 workers on 9 cores)" in rates["workers"]["arithmetic"]
    few = feed_rates(dec, read, cores=9, size=100, has_gpu=False, workers=4)
    assert few["workers"]["samples_per_s"] == pytest.approx(200.0)  # as `run --workers 4`
    assert few["gpu-decode"]["samples_per_s"] == pytest.approx(400.0)  # 100/s x 4 threads
    many = feed_rates(dec, read, cores=9, size=100, has_gpu=False, workers=16)
    assert many["workers"]["samples_per_s"] == pytest.approx(450.0)  # no more than the cores
    assert rates["precompute"]["samples_per_s"] == pytest.approx(120e6 / 30000)
    assert rates["gpu-decode"]["samples_per_s"] == pytest.approx(900.0)
    assert "no GPU" in rates["gpu-decode"]["arithmetic"]


def test_run_cli_reports_bad_input_without_traceback(tmp_path):
    res = CliRunner().invoke(
        bench,
        [
            "run",
            "--data",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "o"),
            "--strategies",
            "workers",
        ],
    )
    assert res.exit_code == 1
    missing = tmp_path / "missing"
    assert res.output == f"Error: {missing}: source folder does not exist (or is not a folder)\n"
    res = CliRunner().invoke(bench, ["run", "--data", "x", "--out", "o", "--epochs", "0"])
    assert res.exit_code == 2
    assert res.output.splitlines()[-1] == (
        "Error: Invalid value for '--epochs': 0 is not in the range x>=1."
    )


def test_run_cli_prints_the_table(tiny_data, tmp_path):
    res = CliRunner().invoke(
        bench,
        [
            "run",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path),
            "--strategies",
            "workers",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--workers",
            "0",
            "--size",
            "16",
            "--consumer",
            "none",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "| workers |" in res.output and "report:" in res.output
    md = (tmp_path / "report.md").read_text()
    assert "data-bound by construction" in md  # consumer none: the verdict is explained


def test_python_m_benchmarks_help():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.startswith("Usage: python -m benchmarks [OPTIONS] COMMAND [ARGS]...")
    commands = [line.split()[0] for line in out.split("Commands:\n", 1)[1].splitlines()]
    assert commands == ["doctor", "run"]


def test_a_store_from_another_dataset_is_refused(tiny_data, tmp_path):
    store = store_of(tiny_data, tmp_path / "store.zarr")
    other = make_sample_dataset(
        tmp_path / "other", num_images=20, num_classes=3, size_range=(32, 40), seed=9
    )
    res = CliRunner().invoke(
        bench,
        [
            "run",
            "--data",
            str(other),
            "--store",
            str(store),
            "--out",
            str(tmp_path / "o"),
            "--strategies",
            "precompute",
        ],
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"--store {store} was built from another dataset than --data {other}" in res.output
    assert "(48 vs 20 samples" in res.output
    same_count = make_sample_dataset(
        tmp_path / "same", num_images=48, num_classes=3, size_range=(32, 56), seed=4
    )
    with pytest.raises(BenchConfigError, match="48 vs 48 samples, source fingerprint"):
        check_store_source(str(same_count), store)


def test_a_store_of_the_same_files_is_accepted_also_from_a_copy(tiny_data, tmp_path):
    store = store_of(tiny_data, tmp_path / "store.zarr")
    assert check_store_source(str(tiny_data), store) is None
    copy = shutil.copytree(tiny_data, tmp_path / "copy")  # new mtimes, same bytes
    assert check_store_source(str(copy), store) is None


def test_a_run_that_measured_nothing_exits_1_and_says_why_in_one_line(tmp_path):
    """A truncated JPEG kills the workers strategy (in a DataLoader worker: a traceback in
    the error's text); a batch larger than the data serves none: neither is "ok", the table
    keeps one row per strategy, and the command fails."""
    data = make_sample_dataset(tmp_path / "d", num_images=12, num_classes=2, size_range=(24, 32))
    first = sorted(data.glob("*/*.jpg"))[0]
    first.write_bytes(first.read_bytes()[:200])  # cut: decoding it fails
    base = ["run", "--data", str(data), "--strategies", "workers", "--epochs", "1"]
    for extra, said in (
        (["--batch-size", "4", "--workers", "1"], f"{first.relative_to(data)}"),
        (["--batch-size", "64", "--workers", "0"], "served no batch of 64 in 1 epoch(s)"),
    ):
        out = tmp_path / f"r{extra[1]}"
        res = CliRunner().invoke(bench, [*base, *extra, "--out", str(out)])
        assert res.exit_code == 1, res.output
        assert "error: no strategy was measured" in res.output
        row = next(ln for ln in (out / "report.md").read_text().splitlines() if "| workers |" in ln)
        assert "failed: run: " in row and said in row, row
        report = json.loads((out / "report.json").read_text())
        assert report["strategies"][0]["status"] == "failed"


def test_doctor_names_an_unreadable_image(tmp_path):
    data = make_sample_dataset(tmp_path / "d", num_images=6, num_classes=2, size_range=(24, 32))
    bad = sorted(data.glob("*/*.jpg"))[0]
    bad.write_bytes(b"not an image at all")
    res = CliRunner().invoke(bench, ["doctor", "--data", str(data), "--max-files", "10"])
    assert res.exit_code == 1 and f"{bad}: not a readable image" in res.output, res.output
