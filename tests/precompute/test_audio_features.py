"""Log-mel against an independent numpy implementation; int16/float16 storage precision."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from precompute.audio.features import (
    from_int16,
    logmel,
    logmel_tensor,
    mel_filterbank,
    num_frames,
    to_int16,
)
from precompute.errors import SpecError


def _np_fbank(n_fft: int, n_mels: int, rate: int, f_min: float, f_max: float) -> np.ndarray:
    """HTK triangles written from the formulas: (n_freqs, n_mels)."""
    freqs = np.linspace(0, rate // 2, n_fft // 2 + 1)
    mel = np.linspace(
        2595 * np.log10(1 + f_min / 700), 2595 * np.log10(1 + f_max / 700), n_mels + 2
    )
    edges = 700 * (10 ** (mel / 2595) - 1)
    out = np.zeros((freqs.size, n_mels))
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        rising = (freqs - lo) / (mid - lo)
        falling = (hi - freqs) / (hi - mid)
        out[:, m] = np.maximum(0, np.minimum(rising, falling))
    return out


def _np_logmel(x: np.ndarray, rate: int, n_fft: int, hop: int, n_mels: int) -> np.ndarray:
    """Periodic Hann, reflect-centred frames, |rfft|^2, mel, 10 log10, top_db 80."""
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    padded = np.pad(x.astype(np.float64), n_fft // 2, mode="reflect")
    frames = 1 + (padded.size - n_fft) // hop
    stack = np.stack([padded[i * hop : i * hop + n_fft] * window for i in range(frames)])
    power = np.abs(np.fft.rfft(stack, axis=1)) ** 2  # (frames, n_freqs)
    mel = (power @ _np_fbank(n_fft, n_mels, rate, 0.0, rate // 2)).T
    db = 10 * np.log10(np.maximum(mel, 1e-10))
    return np.maximum(db, db.max() - 80.0)


def _signals(rate: int, n: int) -> dict[str, np.ndarray]:
    t = np.arange(n) / rate
    rng = np.random.default_rng(7)
    chirp = np.sin(2 * np.pi * (100 * t + 0.5 * (rate / 2.5 - 100) * t**2 / t[-1]))
    return {
        "tone": 0.5 * np.sin(2 * np.pi * 440 * t),
        "chirp": 0.3 * chirp,
        "noise": np.clip(0.1 * rng.standard_normal(n), -1, 1),
    }


@pytest.mark.parametrize(("f_min", "f_max"), [(0.0, 8000.0), (20.0, 7600.0), (300.0, 4000.0)])
def test_filterbank_matches_the_numpy_formulas(f_min: float, f_max: float) -> None:
    fb = mel_filterbank(201, f_min, f_max, 64, 16000)
    np.testing.assert_allclose(fb.numpy(), _np_fbank(400, 64, 16000, f_min, f_max), atol=1e-5)
    assert fb.shape == (201, 64) and (fb.amax(dim=0) > 0).all()


@pytest.mark.parametrize(
    ("rate", "n_fft", "hop", "n_mels"),
    [(16000, 400, 160, 64), (8000, 256, 80, 40), (22050, 1024, 256, 128)],
)
def test_logmel_matches_the_numpy_implementation(
    rate: int, n_fft: int, hop: int, n_mels: int
) -> None:
    n = rate // 2 + 37
    for name, x in _signals(rate, n).items():
        got = logmel(x.astype(np.float32), rate, n_fft, hop, n_mels)
        want = _np_logmel(x, rate, n_fft, hop, n_mels)
        assert got.shape == want.shape == (n_mels, num_frames(n, hop)), name
        np.testing.assert_allclose(got, want, atol=0.02, err_msg=name)


def test_a_pure_tone_peaks_in_the_mel_band_of_its_frequency() -> None:
    rate, freq = 16000, 1000.0
    x = np.sin(2 * np.pi * freq * np.arange(rate) / rate).astype(np.float32)
    fb = _np_fbank(400, 64, rate, 0.0, 8000.0)
    band = int(np.argmax(fb[round(freq * 400 / rate)]))  # the filter highest at 1 kHz
    assert int(np.argmax(logmel(x, rate).mean(axis=1))) == band


def test_batched_tensor_input_matches_one_by_one() -> None:
    x = torch.from_numpy(np.stack(list(_signals(16000, 4000).values())).astype(np.float32))
    batch = logmel_tensor(x, 16000)
    for i in range(3):
        torch.testing.assert_close(batch[i], logmel_tensor(x[i], 16000))


def test_silence_sits_at_the_floor_and_short_waves_are_refused() -> None:
    assert np.all(logmel(np.zeros(1000, np.float32), 16000) == -100.0)
    with pytest.raises(SpecError, match="200 samples are too few for n_fft 400"):
        logmel(np.zeros(200, np.float32), 16000)


def _snr(ref: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(ref**2) / np.sum((got - ref) ** 2)))


def test_int16_and_float16_waveform_storage_snr() -> None:
    """The SNRs docs/audio.md records (dB).

    int16: 91.9 (tone), 87.7 (chirp), 81.0 (noise); float16: 75.4, 72.7, 73.7.
    """
    sig = {k: v.astype(np.float32) for k, v in _signals(16000, 16000).items()}
    int16 = {k: _snr(v, from_int16(to_int16(v))) for k, v in sig.items()}
    half = {k: _snr(v, v.astype(np.float16).astype(np.float32)) for k, v in sig.items()}
    assert int16["tone"] > 91 and int16["chirp"] > 87 and int16["noise"] > 80
    assert min(half.values()) > 70


def test_int16_round_trip_clips_and_rounds() -> None:
    x = np.array([-2.0, -1.0, -0.5, 0.0, 1e-6, 0.5, 1.0, 3.0], np.float32)
    stored = to_int16(x)
    assert stored.dtype == np.int16
    assert stored.tolist() == [-32768, -32768, -16384, 0, 0, 16384, 32767, 32767]
    np.testing.assert_allclose(from_int16(stored), np.clip(x, -1, 32767 / 32768), atol=0.5 / 32768)
    pcm = np.arange(-32768, 32768, dtype=np.int16)  # what soundfile decodes PCM_16 to, exactly
    np.testing.assert_array_equal(to_int16(pcm.astype(np.float32) / 32768), pcm)


def test_logmel_float16_storage_error_in_db() -> None:
    """docs/audio.md: float16 log-mel is within 0.0156 dB here (half a float16 step).

    Below 128 dB in magnitude a float16 step is at most 0.0625 dB: the bound is half of it.
    """
    worst = 0.0
    for x in _signals(16000, 16000).values():
        mel = logmel(x.astype(np.float32), 16000)
        worst = max(worst, float(np.abs(mel.astype(np.float16).astype(np.float32) - mel).max()))
    assert worst <= 0.0313


def test_int16_clipping_is_counted_beyond_the_rounding_of_either_end() -> None:
    from precompute.audio.features import clips_int16

    step = 1 / 32768
    assert not clips_int16(np.array([-1.0, 32767 * step], np.float64))  # PCM_16's own range
    assert not clips_int16(np.array([-32768.5 * step, 32767.5 * step]))  # rounding only
    assert clips_int16(np.array([32767.6 * step]))
    assert clips_int16(np.array([-32768.6 * step]))
    assert not clips_int16(np.zeros(0, np.float32))
