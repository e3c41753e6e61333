"""Several segments of one recording in a ``path,label,start,end`` manifest, each a sample.

A manifest allowed one row per file, so keyword segments of one long recording could not be
built. A file may now be listed once per segment: each row is a sample keyed
``PATH#START-END``; the same file with the same segment twice is still an error.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from precompute.audio.source import list_audio_source
from precompute.errors import SourceError
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.spec import BuildSpec

RATE = 8000


def _recording(path: Path) -> None:
    """1.2 s: 300 Hz for the first 0.6 s, 900 Hz after."""
    t = np.arange(int(1.2 * RATE)) / RATE
    wave = 0.5 * np.sin(2 * np.pi * np.where(t < 0.6, 300.0, 900.0) * t)
    buf = io.BytesIO()
    sf.write(buf, wave.astype(np.float32), RATE, format="WAV", subtype="PCM_16")
    path.write_bytes(buf.getvalue())


def _spec(**audio: object) -> BuildSpec:
    opts = {"clip_seconds": 0.3, "sample_rate": RATE, **audio}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    return BuildSpec(size=8, shard_samples=8, chunk_samples=4, fields=fields)


def _source(tmp_path: Path, rows: str) -> Path:
    (tmp_path / "rec").mkdir(exist_ok=True)
    _recording(tmp_path / "rec" / "long.wav")
    _recording(tmp_path / "rec" / "other.wav")
    (tmp_path / "m.csv").write_text("path,label,start,end\n" + rows)
    return tmp_path / "m.csv"


def _peak_hz(wave: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(wave.astype(np.float64) * np.hanning(len(wave))))
    return float(np.fft.rfftfreq(len(wave), 1 / RATE)[spectrum.argmax()])


def test_each_segment_of_one_file_is_a_sample_of_its_own(tmp_path: Path) -> None:
    rows = "rec/long.wav,low,0.1,0.4\nrec/long.wav,high,0.7,1.0\nrec/other.wav,low,,\n"
    src = _source(tmp_path, rows)
    attrs = build(str(src), str(tmp_path / "s"), _spec(), progress=False, runner="sequential")
    assert attrs["report"]["num_valid"] == 3
    import zarr

    got = {n: np.asarray(zarr.open_array(str(tmp_path / "s" / n), mode="r")[:])
           for n in ("key", "audio", "audio.start", "label")}  # fmt: skip
    by_key = {str(k): i for i, k in enumerate(got["key"]) if k}
    assert sorted(by_key) == ["rec/long.wav#0.100-0.400", "rec/long.wav#0.700-1.000",
                              "rec/other.wav"]  # fmt: skip
    low, high = by_key["rec/long.wav#0.100-0.400"], by_key["rec/long.wav#0.700-1.000"]
    assert abs(got["audio.start"][low] - 0.1) < 1e-6 and abs(got["audio.start"][high] - 0.7) < 1e-6
    assert abs(_peak_hz(got["audio"][low]) - 300) < 40  # each its own part of the recording
    assert abs(_peak_hz(got["audio"][high]) - 900) < 40
    names = attrs["report"]["classes"]["label"]
    assert names[got["label"][low]] == "low" and names[got["label"][high]] == "high"


def test_the_same_segment_twice_is_an_error_naming_it(tmp_path: Path) -> None:
    src = _source(tmp_path, "rec/long.wav,low,0.1,0.4\nrec/./long.wav,high,0.1,0.4\n")
    with pytest.raises(SourceError, match=r"'rec/\./long\.wav' is listed twice \(as 'rec/long"
                       r"\.wav'\) with the same segment \(0\.100-0\.400\)"):  # fmt: skip
        list_audio_source(str(src), _spec().fields, "raise")
    src = _source(tmp_path, "rec/long.wav,low,,\nrec/long.wav,low,,\n")
    with pytest.raises(SourceError, match=r"with the same segment \(the whole file\)"):
        list_audio_source(str(src), _spec().fields, "raise")


def test_windows_of_several_segments_of_one_file_keep_apart(tmp_path: Path) -> None:
    src = _source(tmp_path, "rec/long.wav,low,0,0.6\nrec/long.wav,high,0.3,\n")
    source = list_audio_source(str(src), _spec(clips="all").fields, "raise")
    assert [item.key for item in source.items] == [
        "rec/long.wav#0.000-0.600@0.000",
        "rec/long.wav#0.000-0.600@0.300",
        "rec/long.wav#0.300-end@0.300",  # the same start as a window of the first segment
        "rec/long.wav#0.300-end@0.600",
        "rec/long.wav#0.300-end@0.900",
    ]
