"""``precompute check`` says what the build will note, and the build says files cut short.

A check printed ``all good`` for inputs the build then noted (16-bit grey of 12-bit values, clips
padded, clipped or cut short): the user runs check to learn about the data before the build.
The check's note lines are the build summary's, line for line; a file kept cut short
(``report.truncated``) is a note of the summary too, not only an ``inspect`` line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.cli import main
from tests.precompute.audio_bytes import encode, tone

SMALL = ["--size", "8", "--shard-samples", "4", "--chunk-samples", "2"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    """``precompute ARGS`` in process (no Ray): exit code, stdout and stderr lines."""
    capsys.readouterr()
    try:
        main([*args, *SMALL, "--runner", "sequential", "--quiet"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out.splitlines(), got.err.splitlines()


def _notes(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("note: ")]


def _twelve_bit(root: Path) -> Path:
    """Class folders of 16-bit grey PNGs of 12-bit values (CT, X-ray) and 8-bit ones."""
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(2):
            Image.fromarray((rng.random((12, 12)) * 4095).astype(np.uint16)).save(
                root / c / f"ct{i}.png"
            )
            Image.fromarray((rng.random((12, 12)) * 255).astype(np.uint8)).save(
                root / c / f"p{i}.png"
            )
    return root


def test_check_prints_the_notes_of_the_builds_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(_twelve_bit(tmp_path / "src"))
    code, out, _ = _run(capsys, "check", src)
    assert code == 0  # not bad inputs: kept by the build
    checked = _notes(out)
    assert out[-1] == f"checked {src}: 8 inputs, none bad, {len(checked)} notes (above)"
    assert checked[0].startswith("note: 4 inputs (e.g. a/ct0.png): 16-bit grey with every value")
    assert checked[1].startswith("note: 8 inputs (e.g. a/ct0.png): grey sources stored as 3")
    code, _, err = _run(capsys, "build", src, "--out", str(tmp_path / "s"))
    assert code == 0 and _notes(err) == checked  # the build's summary says the same
    code, out, _ = _run(capsys, "check", src, "--json")
    assert code == 0 and json.loads("\n".join(out))["notes"]["gray_low_bits"]["count"] == 4


def _clips(root: Path) -> Path:
    """Audio class folders: clips padded (short), clipped (a float WAV over 1), cut short."""
    (root / "k").mkdir(parents=True)
    (root / "j").mkdir(parents=True)
    (root / "j" / "whole.wav").write_bytes(encode(tone(440, 8000, 0.5), 8000, "wav16"))
    (root / "k" / "short.wav").write_bytes(encode(tone(440, 8000, 0.2), 8000, "wav16"))
    loud = encode(tone(440, 8000, 0.5, amp=1.5), 8000, "wavfloat")
    (root / "k" / "loud.wav").write_bytes(loud)
    whole = encode(tone(660, 8000, 0.5), 8000, "wav16")
    (root / "k" / "cut.wav").write_bytes(whole[: len(whole) - 2000])  # the header says more
    return root


def test_check_and_build_note_clips_padded_clipped_and_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(_clips(tmp_path / "src"))
    audio = ["--clip-seconds", "0.5"]
    code, out, _ = _run(capsys, "check", src, *audio)
    assert code == 0 and out[-1] == f"checked {src}: 4 inputs, none bad, 3 notes (above)"
    checked = _notes(out)
    assert [line.split(": ")[1] for line in checked] == [
        "1 input (e.g. k/loud.wav)",  # clipped
        "2 clips (e.g. k/cut.wav)",  # padded: cut.wav and short.wav
        "1 input (e.g. k/cut.wav)",  # cut short
    ]
    assert "clipped to int16" in checked[0] and "shorter than the clip length" in checked[1]
    assert "data ended before its header said" in checked[2]
    code, _, err = _run(capsys, "build", src, "--out", str(tmp_path / "s"), *audio)
    assert code == 0 and _notes(err) == checked  # truncated too, as a note line
