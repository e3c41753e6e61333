"""decode_audio on real files: every encoding, rates, channel rules, hostile inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from precompute.audio.decode import MAX_CHANNELS, decode_audio, wav_declared_frames
from precompute.errors import DecodeError, SpecError
from precompute.notes import collecting
from tests.precompute.audio_bytes import (
    ENCODINGS,
    LOSSLESS,
    encode,
    flac_with_total,
    tone,
    with_channels,
    with_data_size,
)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("rate", [8000, 16000, 44100])
def test_every_encoding_decodes_to_the_tone_at_the_target_rate(
    encoding: str, rate: int, tmp_path: Path
) -> None:
    fmt, subtype, ext = ENCODINGS[encoding]
    path = tmp_path / f"a.{ext}"
    sf.write(path, tone(440.0, rate, 0.5, channels=2), rate, format=fmt, subtype=subtype)
    data = path.read_bytes()
    wave, info = decode_audio(data, "a.x", sample_rate=16000, channels="keep")
    assert wave.dtype == np.float32 and wave.flags.c_contiguous
    assert wave.shape[0] == 2 and info.channels == 2 and info.sample_rate == rate
    assert abs(wave.shape[1] - 8000) <= 1200 and not info.truncated  # MP3 adds priming frames
    assert info.format == ENCODINGS[encoding][0]
    ref = tone(440.0, 16000, 0.5, channels=2).T
    rms = np.sqrt(np.mean(wave[:, 2000:6000] ** 2, axis=1))
    np.testing.assert_allclose(rms, np.sqrt(np.mean(ref**2, axis=1)), rtol=0.05)
    if encoding in LOSSLESS and rate == 16000:  # no resampling: the samples themselves
        np.testing.assert_allclose(wave, ref, atol=2.0**-14)


@pytest.mark.parametrize("rate", [8000, 22050, 48000])
def test_resampled_tone_keeps_its_frequency(rate: int) -> None:
    data = encode(tone(1000.0, rate, 1.0), rate, "wav24")
    wave, _ = decode_audio(data, "t.wav", sample_rate=16000)
    assert wave.shape == (1, 16000)
    spectrum = np.abs(np.fft.rfft(wave[0] * np.hanning(16000)))
    assert abs(int(np.argmax(spectrum)) - 1000) <= 1  # 1 Hz bins
    # soxr VHQ: a clean sine in the middle (edges hold the filter's transients)
    ref = tone(1000.0, 16000, 1.0)[:, 0]
    err = wave[0, 1000:-1000] - ref[1000:-1000]
    assert 10 * np.log10(np.mean(ref**2) / np.mean(err**2)) > 60


def test_channel_rules() -> None:
    data = encode(tone(440.0, 16000, 0.1, channels=3), 16000, "wav16")
    mono, _ = decode_audio(data, "s.wav", sample_rate=16000, channels="mono")
    keep, _ = decode_audio(data, "s.wav", sample_rate=16000, channels="keep")
    two, _ = decode_audio(data, "s.wav", sample_rate=16000, channels=2)
    np.testing.assert_allclose(mono[0], keep.mean(axis=0), atol=1e-6)
    np.testing.assert_array_equal(two, keep[:2])
    resampled, _ = decode_audio(data, "s.wav", sample_rate=8000, channels=2)
    assert resampled.shape == (2, 800) and resampled.flags.c_contiguous
    np.testing.assert_allclose(np.abs(resampled[:, 200:600]).max(1), [0.5, 0.25], atol=0.01)
    single = encode(tone(440.0, 16000, 0.1), 16000, "wav16")
    rep, _ = decode_audio(single, "m.wav", sample_rate=16000, channels=4)
    assert rep.shape[0] == 4 and np.array_equal(rep[0], rep[3])
    with pytest.raises(DecodeError, match=r"s\.wav: has 3 channels; 4 were asked for"):
        decode_audio(data, "s.wav", sample_rate=16000, channels=4)
    with pytest.raises(SpecError, match=r"channels must be 'mono', 'keep' or 1\.\.64, got 'both'"):
        decode_audio(data, "s.wav", sample_rate=16000, channels="both")


def test_a_downmix_that_cancels_its_channels_is_noted() -> None:
    wave = tone(440.0, 16000, 0.2)  # (frames, 1), amplitude 0.5
    # downmix power over the channels' mean power: noted under 1/100 (-20 dB)
    cases = {
        "anti.wav": (np.hstack([wave, -wave]), True),  # opposite polarity: silence
        "mostly.wav": (np.hstack([wave, -0.9 * wave]), True),  # 0.0025 / 0.905: -25.6 dB
        "partly.wav": (np.hstack([wave, -0.8 * wave]), False),  # 0.01 / 0.82: -19.1 dB
        "same.wav": (np.hstack([wave, wave]), False),
        "one.wav": (np.hstack([wave, 0 * wave]), False),  # one silent channel: -3 dB
        "quiet.wav": (np.hstack([wave, -wave]) * 1e-4, False),  # near silence itself
    }
    with collecting() as notes:
        for key, (samples, _) in cases.items():
            data = encode(samples.astype(np.float32), 16000, "wav16")
            mono, _ = decode_audio(data, key, sample_rate=16000)
            assert mono.shape[0] == 1  # kept as decoded: the note only names it
        decode_audio(encode(wave, 16000, "wav16"), "mono.wav", sample_rate=16000)
        both, _ = decode_audio(
            encode(np.hstack([wave, -wave]), 16000, "wav16"),
            "k.wav",
            sample_rate=16000,
            channels="keep",
        )
    assert both.shape[0] == 2
    assert notes == {"audio_downmix_cancelled": [k for k, (_, bad) in cases.items() if bad]}


def test_truncated_wav_keeps_the_frames_that_are_there(tmp_path) -> None:
    data = encode(tone(440.0, 16000, 1.0), 16000, "wav16")
    path = tmp_path / "cut.wav"
    path.write_bytes(data[: 44 + 2 * 4000])  # the data chunk cut after 4000 frames
    wave, info = decode_audio(path.read_bytes(), "cut.wav", sample_rate=16000)
    assert info.truncated and info.frames == 4000 and info.declared_frames == 16000
    assert wave.shape == (1, 4000)
    np.testing.assert_allclose(wave[0], tone(440.0, 16000, 1.0)[:4000, 0], atol=2.0**-14)
    assert wav_declared_frames(path.read_bytes()) == 16000


def test_a_cut_mp3_is_kept_and_flagged() -> None:
    data = encode(tone(440.0, 16000, 1.0), 16000, "mp3")
    wave, info = decode_audio(data[: len(data) // 2], "cut.mp3", sample_rate=16000)
    assert info.truncated and 0 < info.frames < info.declared_frames
    assert wave.shape == (1, info.frames)


def _hostile() -> dict[str, tuple[bytes, str]]:
    wav = encode(tone(440.0, 8000, 0.2), 8000, "wav16")
    flac = encode(tone(440.0, 8000, 0.2), 8000, "flac")
    nan = tone(440.0, 8000, 0.2)
    nan[700, 0] = np.nan
    inf = tone(440.0, 8000, 0.2)
    inf[5, 0] = np.inf
    return {
        "empty": (b"", r"empty file \(0 bytes\)"),
        "text": (b"id,label\nthis is a text file named .wav\n" * 4, "Format not recognised"),
        "cut header": (wav[:30], "not a readable audio file: .*data"),
        "nan": (encode(nan, 8000, "wavfloat"), "NaN or inf sample at frame 700 "),
        "inf": (encode(inf, 8000, "wavfloat"), "NaN or inf sample at frame 5 "),
        "zero frames": (encode(np.zeros((0, 1), np.float32), 8000, "wav16"), "zero frames"),
        "absurd wav length": (with_data_size(wav, 0xFFFFFFF0), "over the budget"),
        "absurd flac length": (flac_with_total(flac, 2**35), "34359738368 frames x 1 channels"),
        "too many channels": (with_channels(wav, 1000), f"1000 channels; at most {MAX_CHANNELS}"),
        "libsndfile's channel limit": (with_channels(wav, 5000), "Too many channels"),
        "cut flac stream": (flac[: len(flac) // 2], "corrupt audio stream"),
        "unknown format": (b"\x89PNG\r\n\x1a\n" + bytes(100), "not a readable audio file"),
    }


@pytest.mark.parametrize("case", sorted(_hostile()))
def test_hostile_inputs_raise_decode_errors_naming_the_file(case: str) -> None:
    data, reason = _hostile()[case]
    with pytest.raises(DecodeError, match=reason) as err:
        decode_audio(data, "dir/bad.wav", sample_rate=16000)
    assert err.value.key == "dir/bad.wav" and str(err.value).startswith("dir/bad.wav: ")
    assert "0x" not in err.value.reason and "\n" not in str(err.value)


def test_the_byte_budget_is_checked_before_decoding() -> None:
    data = encode(tone(440.0, 8000, 1.0, channels=2), 8000, "flac")
    decode_audio(data, "b.flac", sample_rate=8000, channels="keep", max_bytes=8000 * 2 * 4)
    with pytest.raises(DecodeError, match="8000 frames x 2 channels = 64000 bytes"):
        decode_audio(data, "b.flac", sample_rate=8000, max_bytes=63999)


@pytest.mark.parametrize("missing", ["soundfile", "soxr"])
def test_a_missing_backend_names_what_to_install(monkeypatch, missing: str) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what `import` sees when it is absent
    data = encode(tone(440.0, 8000, 0.1), 8000, "wav16")
    with pytest.raises(
        ImportError, match=rf"audio decoding needs {missing}: pip install soundfile soxr"
    ):
        decode_audio(data, "a.wav", sample_rate=16000)
