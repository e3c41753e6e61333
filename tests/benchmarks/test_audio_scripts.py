"""Smoke runs of the audio example and the audio benchmark at toy sizes (real builds)."""

from __future__ import annotations

import re
import sys

import pytest

from benchmarks import bench_audio
from benchmarks.examples import audio


def test_audio_example_trains_and_reports_accuracy(ray_local: None, capsys, tmp_path) -> None:
    audio.main(["--clips", "24", "--epochs", "1", "--work", str(tmp_path)])
    out = capsys.readouterr().out
    assert "epoch 1/1: train loss" in out
    acc = re.search(r"held-out accuracy ([0-9.]+) over 8 clips \(chance 0\.250\)", out)
    assert acc is not None and 0.0 <= float(acc.group(1)) <= 1.0


@pytest.mark.slow
def test_bench_audio_prints_both_rows_and_the_ratios(capsys, monkeypatch) -> None:
    argv = ["bench_audio", "--clips", "40", "--batch", "8", "--runs", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    bench_audio.main()
    out = capsys.readouterr().out
    assert bench_audio.CLASSIC in out and bench_audio.NOSTALL in out
    ratio = r"(1/[0-9.]+|below one clock tick)"  # a short run may measure no loader CPU
    assert re.search(rf"throughput nostall/classic [0-9.]+x .* nostall/classic {ratio}", out)
