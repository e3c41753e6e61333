"""Smoke runs of the loader and augment benchmarks at toy sizes: every row is produced."""

from __future__ import annotations

import json

from benchmarks.suite import augment
from benchmarks.suite.loader import bench as loader
from tests.benchmarks.figures import assert_positive, figure_after


def test_loader_benchmark_reports_the_contiguous_memmap_reference(capsys, tmp_path) -> None:
    argv = ["--only", "1", "--samples", "96", "--size", "16", "--batch", "16", "--runs", "1"]
    loader.main([*argv, "--workdir", str(tmp_path), "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    for row in (loader.CONTIGUOUS, loader.SAME_ORDER, *loader.LOADER_ROWS):
        assert_positive(out, row, "samples/s")
    for row in ("numpy memmap chunk copy + gather (2 copies)", "zarr-python whole chunks"):
        assert_positive(out, row, "samples/s")
    for reference, target in (("same order", "0.7"), ("contiguous", "0.8")):
        line = f"-> {loader.MAPPED_WHOLE} / memmap samples/s: {reference} "
        assert line in out and f"(target >= {target})" in out.split(line)[1].splitlines()[0]
    doc = json.loads((tmp_path / "out.json").read_text())
    lines = [line for section in doc["sections"] for line in section["lines"]]
    assert len(lines) == 2 * len(loader.LOADER_ROWS) and all(x["value"] > 0 for x in lines)


def test_augment_benchmark_times_every_output_format(capsys) -> None:
    argv = ["--images", "32", "--batch", "8", "--size", "16", "--store-size", "24"]
    augment.main([*argv, "--runs", "1", "--no-grid"])
    out = capsys.readouterr().out
    assert_positive(out, augment.CLASSIC, "samples/s")
    assert_positive(out, augment.CLASSIC, "CPU ms/sample")
    for name in ("float32 channels_last", "bfloat16", "bfloat16 channels_last"):
        assert_positive(out, f"StoreLoader + augment fast, 2 threads, {name}", "samples/s")
        figure_after(
            out, f"{name} / float32 planar, StoreLoader + augment fast, 2 threads (samples/s) "
        )
    for layout in ("", " channels_last"):
        same = f"bfloat16{layout} vs float32 of the same memory format"
        figure_after(out, f"{same} (samples/s) ")
        figure_after(out, f"{same} (CPU: float32's CPU ms/sample over bfloat16's) ")
    ops = figure_after(out, "profiler aten ops per batch, grid (device) path: batch 32 -> ")
    assert ops == int(ops) and figure_after(out, "batch 256 -> ") == ops  # one graph a batch
