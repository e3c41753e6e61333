"""Smoke run of the object-storage benchmark at toy sizes: moto and the line-rate server both
serve the store, and every row reads it with one ranged GET per chunk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.suite import objstore
from tests.benchmarks.figures import assert_positive, figure_values

ROWS = ("local", "local pread+crc", "s3", "s3+cache", "s3 line rate")


def test_every_row_reads_the_store_and_the_object_rows_one_get_per_chunk(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "restored after the test")  # the benchmark sets its own
    argv = ["--samples", "64", "--size", "16", "--chunk-samples", "4", "--batch", "16"]
    objstore.main([*argv, "--runs", "1", "--threads", "2", "--json", str(tmp_path / "o.json")])
    out = capsys.readouterr().out
    for row in ROWS:
        assert_positive(out, row, "samples/s")
        assert_positive(out, row, "CPU ms/sample")
    for row in ("s3", "s3 line rate"):
        assert figure_values(out, row, "gets_per_sample") == [0.25] * 3  # chunks of 4
    assert figure_values(out, "s3+cache", "gets_per_sample") == [0.0] * 3  # epoch 2 on
    doc = json.loads((tmp_path / "o.json").read_text())
    assert len(doc["sections"][0]["lines"]) == len(ROWS)
