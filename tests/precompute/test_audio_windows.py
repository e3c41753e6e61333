"""`--clips all` windows decode only their span: the frames a whole-file decode gives, cheaply."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import zarr

from precompute.audio.decode import decode_audio
from precompute.audio.windows import SEEK_FORMATS, decode_window, resampled_frames
from precompute.cli import main
from precompute.errors import DecodeError
from tests.precompute.audio_bytes import ENCODINGS, encode, with_data_size


def _recording(rate: int, seconds: float, channels: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng([rate, channels, seed])
    t = np.arange(round(rate * seconds)) / rate
    wave = 0.3 * np.sin(2 * np.pi * 440 * t)[:, None] + rng.normal(0, 0.05, (t.size, channels))
    return wave.astype(np.float32)


def _whole(data: bytes, rate: int, channels: str | int, start: float, end: float) -> np.ndarray:
    wave, _ = decode_audio(data, "f", sample_rate=rate, channels=channels)
    a = round(start * rate)
    return wave[:, a : max(round(end * rate), a + 1)]


def _window(data: bytes, rate: int, channels: str | int, start: float, end: float, **kw):
    return decode_window(
        io.BytesIO(data), "f", sample_rate=rate, channels=channels, start=start, end=end,
        max_bytes=kw.get("max_bytes", 1 << 30),
    )  # fmt: skip


# (file rate, store rate): bit-exact pairs (the span is aligned to the resampling grid)
EXACT = [(44100, 16000), (22050, 16000), (48000, 16000), (8000, 16000), (16000, 16000)]


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize(("rate", "store_rate"), EXACT)
def test_a_window_holds_the_frames_of_the_whole_file_decode(
    encoding: str, rate: int, store_rate: int
) -> None:
    data = encode(_recording(rate, 7.3, 2), rate, encoding)
    for start in (0.0, 1.3, 3.0, 6.5, 7.0):
        for channels in ("mono", 2):
            want = _whole(data, store_rate, channels, start, start + 1.0)
            window = _window(data, store_rate, channels, start, start + 1.0)
            if encoding == "ogg":  # libsndfile seeks OGG to wrong frames: decoded whole
                assert window is None
                continue
            got, info, first = window
            assert first == round(start * store_rate)
            assert got.dtype == np.float32 and got.flags.c_contiguous
            if encoding == "mp3":  # after a seek the decoder rounds once more or less
                np.testing.assert_allclose(got, want, atol=1e-7, rtol=0)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{start} s, {channels}")
            assert info.sample_rate == rate and not info.truncated


@pytest.mark.parametrize("fmt", ["AIFF", "AU", "CAF", "W64", "RF64", "WAVEX"])
def test_every_other_seekable_container_gives_the_whole_decodes_frames(fmt: str) -> None:
    assert fmt in SEEK_FORMATS
    buf = io.BytesIO()
    sf.write(buf, _recording(44100, 6.2, 2), 44100, format=fmt, subtype="PCM_16")
    data = buf.getvalue()
    for start in (0.0, 2.7, 5.5):
        got, _, _ = _window(data, 16000, "mono", start, start + 1.0)
        np.testing.assert_array_equal(got, _whole(data, 16000, "mono", start, start + 1.0))


def test_where_soxr_keeps_state_a_window_is_within_1e7_of_the_whole_decode() -> None:
    data = encode(_recording(16000, 5.0, 1), 16000, "wav16")
    for start in (0.0, 2.2, 4.5):
        got, _, _ = _window(data, 8000, "mono", start, start + 1.0)
        want = _whole(data, 8000, "mono", start, start + 1.0)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-7, rtol=0)


def test_the_budget_bounds_the_window_not_the_recording() -> None:
    data = encode(_recording(44100, 6.0, 2), 44100, "flac")
    budget = 4 * 2 * 44100 * 2  # two seconds of the file: less than the recording
    with pytest.raises(DecodeError, match="over the budget"):
        decode_audio(data, "f", sample_rate=16000, max_bytes=budget)
    got, _, _ = _window(data, 16000, "mono", 4.0, 5.0, max_bytes=budget)
    np.testing.assert_array_equal(got, _whole(data, 16000, "mono", 4.0, 5.0))
    with pytest.raises(DecodeError, match=r"a window needs \d+ bytes decoded, over the budget"):
        _window(data, 16000, "mono", 1.0, 5.0, max_bytes=budget)


def test_a_cut_wav_keeps_its_frames_and_says_so() -> None:
    wav = encode(_recording(22050, 3.0, 1), 22050, "wav16")
    cut = with_data_size(wav, 2 * 22050 * 5)  # declares 5 s, holds 3
    got, info, _ = _window(cut, 16000, "mono", 2.5, 3.5)
    wave, whole = decode_audio(cut, "f", sample_rate=16000)
    assert info.truncated and whole.truncated and info.frames == whole.frames
    np.testing.assert_array_equal(got, wave[:, 40000:])
    assert resampled_frames(whole.frames, 22050, 16000) == wave.shape[1]
    with pytest.raises(DecodeError, match=r"window at 3\.2 s starts after the decoded audio ends"):
        _window(cut, 16000, "mono", 3.2, 4.2)


def test_a_long_recording_builds_its_windows_reading_each_span_once(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "birds").mkdir(parents=True)
    (src / "birds" / "dawn.flac").write_bytes(encode(_recording(44100, 20.0, 2), 44100, "flac"))
    (src / "frogs").mkdir()
    (src / "frogs" / "dusk.wav").write_bytes(encode(_recording(16000, 4.0, 1, 1), 16000, "wav16"))
    out = tmp_path / "s.zarr"
    main(["build", str(src), "--out", str(out), "--runner", "sequential", "--clip-seconds", "1",
          "--clips", "all", "--quiet", "--max-pixels", str(1 << 19)])  # fmt: skip
    keys = zarr.open_array(str(out / "key"))[:].tolist()
    assert sorted(keys) == sorted(
        [f"birds/dawn.flac@{s:.3f}" for s in range(20)]
        + [f"frogs/dusk.wav@{s:.3f}" for s in range(4)]
    )
    audio, start = (
        zarr.open_array(str(out / "audio"))[:],
        zarr.open_array(str(out / "audio.start"))[:],
    )
    whole, _ = decode_audio((src / "birds" / "dawn.flac").read_bytes(), "f", sample_rate=16000)
    for i, key in enumerate(keys):
        if key.startswith("birds"):
            a = round(float(start[i]) * 16000)
            want = np.clip(np.round(whole[0, a : a + 16000] * 32768), -32768, 32767)
            np.testing.assert_array_equal(audio[i], want.astype(np.int16))
    report = json.loads((out / "zarr.json").read_text())["attributes"]["nostall"]["report"]
    size = sum(p.stat().st_size for p in src.rglob("*.*"))
    assert 0 < report["bytes_read"] < 2 * size  # spans and margins (1.67x here), not 24 files


def test_windows_follow_the_segment_rules_of_center_clips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An end past the file is that line's error, as with --clips center (not windows up to
    the end); a source of which no file is left is refused, not a shard of 0 rows."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "long.wav").write_bytes(encode(_recording(16000, 3.0, 1), 16000, "wav16"))
    (tmp_path / "a" / "ok.wav").write_bytes(encode(_recording(16000, 2.0, 1), 16000, "wav16"))
    (tmp_path / "m.csv").write_text("path,label,start,end\na/long.wav,x,1,9\na/ok.wav,y,0,2\n")
    base = ["--clip-seconds", "1", "--clips", "all", "--quiet"]
    outside = "a/long.wav: segment start=1.0 end=9.0 s lies outside the file (3.000 s"
    m, r, ok = str(tmp_path / "m.csv"), str(tmp_path / "r"), str(tmp_path / "s")
    with pytest.raises(SystemExit):
        main(["build", m, "--out", r, "--runner", "sequential", *base])
    assert outside in capsys.readouterr().err
    base += ["--on-error", "skip"]
    main(["build", m, "--out", ok, "--runner", "sequential", *base])
    keys = sorted(zarr.open_array(str(tmp_path / "s" / "key"))[:].tolist())
    assert keys == ["a/ok.wav@0.000", "a/ok.wav@1.000"]
    (tmp_path / "bad" / "x").mkdir(parents=True)
    (tmp_path / "bad" / "x" / "empty.wav").write_bytes(b"")
    (tmp_path / "bad" / "x" / "text.wav").write_text("hello")
    with pytest.raises(SystemExit) as exited:
        bad, b = str(tmp_path / "bad"), str(tmp_path / "b")
        main(["build", bad, "--out", b, "--runner", "sequential", *base])
    assert exited.value.code == 2 and not (tmp_path / "b").exists()
    said = "all 2 files were left out while listing (e.g. x/empty.wav: empty file (0 bytes))"
    assert said in capsys.readouterr().err
