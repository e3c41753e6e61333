"""Fixed-length clips, windows and manifest segments of decoded waves."""

from __future__ import annotations

import numpy as np
import pytest

from precompute.audio.clips import fit_clip, segment, windows
from precompute.errors import DecodeError, SpecError


def _ramp(n: int, channels: int = 2) -> np.ndarray:
    return np.stack([np.arange(1, n + 1, dtype=np.float32) * (c + 1) for c in range(channels)])


def test_short_wave_is_zero_padded_with_its_valid_length() -> None:
    clip, valid = fit_clip(_ramp(5), 8)
    assert valid == 5 and clip.shape == (2, 8) and clip.dtype == np.float32
    np.testing.assert_array_equal(clip[:, :5], _ramp(5))
    assert not clip[:, 5:].any()


@pytest.mark.parametrize(("n", "start"), [(10, 1), (11, 1), (9, 0), (8, 0)])
def test_long_wave_is_centre_cropped(n: int, start: int) -> None:
    clip, valid = fit_clip(_ramp(n), 8)
    assert valid == 8
    np.testing.assert_array_equal(clip, _ramp(n)[:, start : start + 8])
    head, _ = fit_clip(_ramp(n), 8, mode="start")
    np.testing.assert_array_equal(head, _ramp(n)[:, :8])


def test_fit_clip_refuses_bad_arguments() -> None:
    with pytest.raises(SpecError, match="length must be a positive integer, got 0"):
        fit_clip(_ramp(4), 0)
    with pytest.raises(SpecError, match=r"mode must be one of \['center', 'start'\], got 'end'"):
        fit_clip(_ramp(4), 2, mode="end")
    with pytest.raises(ValueError, match=r"wave must be \(channels, frames\), got shape \(4,\)"):
        fit_clip(np.zeros(4), 2)


def test_windows_cover_the_wave_with_their_start_times() -> None:
    wave = _ramp(11, channels=1)
    out = windows(wave, length=4, hop=3, sample_rate=2)
    assert [(w.valid, w.start_seconds) for w in out] == [(4, 0.0), (4, 1.5), (4, 3.0), (2, 4.5)]
    np.testing.assert_array_equal(out[1].clip[0], [4, 5, 6, 7])
    np.testing.assert_array_equal(out[3].clip[0], [10, 11, 0, 0])
    dropped = windows(wave, length=4, hop=3, sample_rate=2, last="drop")
    assert [w.start_seconds for w in dropped] == [0.0, 1.5, 3.0]


def test_windows_stop_at_a_window_that_reaches_the_end() -> None:
    out = windows(_ramp(10, 1), length=6, hop=2, sample_rate=1)
    assert [(w.start_seconds, w.valid) for w in out] == [(0.0, 6), (2.0, 6), (4.0, 6)]


def test_a_wave_shorter_than_a_window_gives_one_padded_window_even_with_drop() -> None:
    (only,) = windows(_ramp(3, 1), length=5, hop=5, sample_rate=1, last="drop")
    assert only.valid == 3 and only.start_seconds == 0.0 and only.clip.shape == (1, 5)


def test_segments_become_frame_slices() -> None:
    assert segment(16000, 16000, 0.25, 0.5, "k") == slice(4000, 8000)
    assert segment(16000, 16000, None, None, "k") == slice(0, 16000)
    assert segment(16000, 16000, 0.5, 1.00002, "k") == slice(8000, 16000)  # < half a frame


@pytest.mark.parametrize(
    ("start", "end", "reason"),
    [
        (-0.1, 0.5, "needs 0 <= start < end"),
        (0.5, 0.5, "needs 0 <= start < end"),
        (0.7, 0.2, "needs 0 <= start < end"),
        (1.0, None, r"outside the file \(1\.000 s, 16000 frames\)"),
        (0.2, 1.5, "outside the file"),
        (float("nan"), 0.5, "start must be a finite number of seconds"),
        (0.0, float("inf"), "end must be a finite number of seconds"),
    ],
)
def test_segments_outside_the_file_name_it(start, end, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason) as err:
        segment(16000, 16000, start, end, "long/rec.flac")
    assert str(err.value).startswith("long/rec.flac: segment start=")
