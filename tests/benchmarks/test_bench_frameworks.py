"""Smoke run of the frameworks benchmark at toy sizes: every row and ratio is produced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.suite import frameworks
from tests.benchmarks.figures import assert_positive


def test_frameworks_benchmark_times_every_bridge_against_store_loader(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--samples", "64", "--sizes", "16", "--batch", "8", "--augment-size", "12"]
    argv += ["--step-ms", "1", "--runs", "1", "--workdir", str(tmp_path)]
    frameworks.main([*argv, "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    for row in (frameworks.REFERENCE, *frameworks.BRIDGES, *frameworks.FLOORS):
        assert_positive(out, row, "batches/s")
        assert_positive(out, row, "CPU ms/batch")
    for name in frameworks.BRIDGES:
        assert out.count(f"{name} / StoreLoader: batches/s ") == 3  # raw, step, augment
    for name in frameworks.FLOORS:  # the frameworks alone, on the stores without a step
        assert out.count(f"{name} / StoreLoader: batches/s ") == 1
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [len(s["rows"]) for s in doc["sections"]] == [8, 6, 6]
    assert all(line["value"] > 0 for s in doc["sections"] for line in s["lines"])
