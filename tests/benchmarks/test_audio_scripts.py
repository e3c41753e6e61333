"""Smoke runs of the audio example and the audio benchmark at toy sizes (real builds)."""

from __future__ import annotations

import re

import pytest

from benchmarks.examples import audio
from benchmarks.suite import audio as audio_bench
from tests.benchmarks.figures import assert_positive, figure_after


@pytest.mark.ray
def test_audio_example_beats_chance(ray_local: None, capsys, tmp_path) -> None:
    accuracy = audio.main(["--clips", "96", "--epochs", "6", "--work", str(tmp_path)])
    out = capsys.readouterr().out
    assert "epoch 6/6: train loss" in out
    assert f"held-out accuracy {accuracy:.3f} over 32 clips (chance 0.250)" in out
    assert accuracy > 2 * 0.25, out  # chance: one class in four


@pytest.mark.slow
def test_audio_benchmark_prints_both_rows_and_the_ratios(capsys) -> None:
    audio_bench.main(["--clips", "40", "--batch", "8", "--runs", "1", "--long-minutes", "0.25,0.5",
                      "--long-runs", "1", "--runner", "sequential"])  # fmt: skip
    out = capsys.readouterr().out
    for row in ("build 1 s", "decode+resample 0.25 min", "build 0.5 min"):
        assert_positive(out, row, "wall_s")
    for length in ("0.25", "0.5"):  # a difference of timings: toy sizes may make it negative
        figure_after(out, f"build/decode {length} min, less the fixed cost ", positive=False)
    assert 0.5 < figure_after(out, "build peak RSS 0.5 min / 0.25 min ") < 2
    for row in (audio_bench.CLASSIC, audio_bench.NOSTALL):
        assert_positive(out, row, "samples/s")
    speed = re.search(r"throughput nostall/classic ([0-9.]+)x \(goal >= 10x\)", out)
    assert speed is not None and float(speed.group(1)) > 0
    ratio = r"(1/[0-9.]+|below one clock tick \(run longer\))"  # a short run may measure none
    assert re.search(rf"CPU per sample nostall/classic {ratio} \(goal <= 1/20\)", out)
