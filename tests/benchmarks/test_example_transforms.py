"""The examples of the user's own preprocessing and of what is stored, at small settings: each
builds its stores in process and prints what it shows (numbers checked, not just printed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.examples import ct_window, speech_mfcc, xray_clahe
from precompute.format.layout import open_store_info

pytestmark = pytest.mark.slow


def test_clahe_raises_the_local_contrast_and_leaves_the_landmarks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("cv2", reason="the example's transform uses the user's OpenCV")
    out = xray_clahe.main(["--quick", "--work", str(tmp_path)])
    assert out["clahe"] > 1.3 * out["plain"]
    said = capsys.readouterr().out
    assert "transform  benchmarks.examples.xray_clahe:clahe at decoded, clip_limit=2.0" in said
    assert "landmarks stored identically: True" in said
    assert "the same build again is the same store: True" in said
    info = open_store_info(tmp_path / "clahe.zarr")
    assert info.fields[0].options["channels"] == 1


def test_windows_keep_what_8_bits_lose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = ct_window.main(["--quick", "--work", str(tmp_path)])
    eight, sixteen, windowed = out.values()
    assert eight <= 1 and sixteen >= 25 and windowed >= 60  # 8 bits: one grey level or none
    assert "--bit-depth 16" in capsys.readouterr().out


def test_mfcc_of_speech_trains_past_chance(tmp_path: Path) -> None:
    history = speech_mfcc.main(["--quick", "--work", str(tmp_path)])
    assert max(history[-3:]) >= 0.8, history  # chance is 1/3
    stats = open_store_info(tmp_path / "train.zarr").report["band_stats"]["audio"]
    assert len(stats["mean"]) == 13
