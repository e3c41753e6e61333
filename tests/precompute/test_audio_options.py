"""The audio feature options users ask for: band limits, dB range, mel scale and norm, MFCC,
per-band statistics stored and used to standardise. Real WAV files, real builds in process."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import torch
import zarr

from loaders import StoreLoader
from loaders.augment import AudioAugment
from loaders.augment.errors import AugmentError
from precompute.audio.features import (
    dct_matrix,
    hz_to_mel,
    logmel,
    mel_filterbank,
    mel_to_hz,
    mfcc,
)
from precompute.cli import main
from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.format.layout import open_store_info
from tests.precompute.audio_bytes import tone

RATE = 16000


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two classes of tones with noise, 0.6 to 1.2 s long (some clips padded)."""
    root = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(5)
    for c, base in (("low", 300.0), ("high", 2500.0)):
        (root / c).mkdir()
        for i in range(4):
            wave = tone(base * (1 + 0.1 * i), RATE, 0.6 + 0.2 * i)[:, 0]
            wave = wave + 0.01 * rng.standard_normal(wave.shape).astype(np.float32)
            sf.write(root / c / f"{i}.wav", wave, RATE, subtype="FLOAT")
    return root


def _build(clips: Path, out: Path, *flags: str) -> Path:
    main(["build", str(clips), "--out", str(out), "--clip-seconds", "1", "--quiet",
          "--runner", "sequential", *flags])  # fmt: skip
    return out


def _stored(out: Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    audio = np.asarray(zarr.open_array(str(out / "audio"), mode="r")[:])
    keys = [str(k) for k in zarr.open_array(str(out / "key"), mode="r")[:]]
    length = np.asarray(zarr.open_array(str(out / "audio.length"), mode="r")[:])
    return audio, keys, length


def _clip(clips: Path, key: str) -> np.ndarray:
    """The stored clip's samples: the file's, zero-padded to one second (all are <= 1.2 s)."""
    wave, _ = sf.read(clips / key, dtype="float32")
    out = np.zeros(RATE, np.float32)
    start = max(len(wave) - RATE, 0) // 2  # the centre crop of a longer file
    part = wave[start : start + RATE]
    out[: len(part)] = part
    return out


def test_band_limits_db_range_scale_and_norm_are_the_stored_log_mel(
    clips: Path, tmp_path: Path
) -> None:
    flags = ["--features", "logmel", "--n-mels", "40", "--f-min", "100", "--f-max", "6000",
             "--top-db", "60", "--mel-scale", "slaney", "--mel-norm", "slaney"]  # fmt: skip
    out = _build(clips, tmp_path / "s", *flags)
    audio, keys, _ = _stored(out)
    assert audio.shape == (8, 40, 101) and audio.dtype == np.float16
    for k, key in enumerate(keys):
        want = logmel(_clip(clips, key), RATE, 400, 160, 40, 100.0, 6000.0, 60.0, "slaney",
                      "slaney").astype(np.float16)  # fmt: skip
        assert np.array_equal(audio[k], want)
        assert float(audio[k].max() - audio[k].min()) <= 60.0 + 0.1  # top_db 60
    plain = _stored(_build(clips, tmp_path / "plain", "--features", "logmel"))[0]
    assert not np.array_equal(audio[:, :40], plain[:, :40])
    options = dict(open_store_info(out).fields[0].options)
    assert (options["f_min"], options["f_max"], options["top_db"]) == (100.0, 6000.0, 60.0)


def test_mfcc_is_the_orthonormal_dct_of_the_log_mel(clips: Path, tmp_path: Path) -> None:
    out = _build(clips, tmp_path / "s", "--features", "mfcc", "--n-mfcc", "13")
    audio, keys, _ = _stored(out)
    assert audio.shape == (8, 13, 101) and audio.dtype == np.float32
    for k, key in enumerate(keys):
        mel = logmel(_clip(clips, key), RATE).astype(np.float64)
        want = dct_matrix(13, 64).double().numpy().T @ mel
        np.testing.assert_allclose(audio[k], want, rtol=1e-4, atol=1e-3)
    dct = dct_matrix(64, 64).double()
    torch.testing.assert_close(dct.T @ dct, torch.eye(64, dtype=torch.float64), atol=1e-5, rtol=0)
    assert np.array_equal(mfcc(_clip(clips, keys[0]), RATE, 13), audio[0])


def test_the_slaney_scale_and_norm() -> None:
    assert hz_to_mel(1000.0, "slaney") == pytest.approx(15.0)
    assert hz_to_mel(2000.0, "slaney") == pytest.approx(15.0 + 27 * math.log(2) / math.log(6.4))
    assert hz_to_mel(500.0, "slaney") == pytest.approx(7.5)  # linear below 1 kHz
    mels = torch.tensor([3.0, 15.0, 30.0])
    back = [hz_to_mel(float(f), "slaney") for f in mel_to_hz(mels, "slaney")]
    assert back == pytest.approx(mels.tolist(), rel=1e-5)
    fb = mel_filterbank(4097, 0.0, 8000.0, 40, RATE, "slaney", "slaney")  # fine FFT bins
    areas = fb.sum(dim=0) * (8000.0 / 4096)  # each triangle's area, in Hz
    assert areas.numpy() == pytest.approx(np.ones(40), rel=0.02)
    assert mel_filterbank(201, 0.0, 8000.0, 40, RATE).max() == pytest.approx(1.0, abs=0.05)


def test_feature_options_a_representation_leaves_unused_are_refused(
    clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags, said in (
        (["--f-min", "50"], "--f-min: a feature option, without effect on a waveform"),
        (["--features", "logmel", "--n-mfcc", "13"], "--n-mfcc: an MFCC option"),
        (
            ["--n-mfcc", "13"],
            "--n-mfcc: an MFCC option, without effect on a waveform: add --features mfcc",
        ),  # not logmel, whose MFCC option it is not either
    ):
        with pytest.raises(SystemExit):
            _build(clips, tmp_path / "s", *flags)
        assert said in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
    with pytest.raises(SpecError, match="need 0 <= f_min < f_max <= sample_rate / 2"):
        FieldSpec("audio", "audio", {"clip_seconds": 1, "representation": "logmel",
                                     "f_max": 9000.0})  # fmt: skip
    with pytest.raises(SpecError, match="n_mfcc 80 is more than n_mels 64"):
        FieldSpec("audio", "audio", {"clip_seconds": 1, "representation": "mfcc", "n_mfcc": 80})
    default = FieldSpec("audio", "audio", {"clip_seconds": 1, "representation": "logmel"})
    assert set(default.to_dict()["options"]) == {  # the late options at their defaults: out
        "representation", "sample_rate", "clip_seconds", "channels", "n_mels", "n_fft",
        "hop_length", "clips", "hop_seconds",
    }  # fmt: skip


def test_per_band_statistics_are_stored_and_standardise_the_features(
    clips: Path, tmp_path: Path
) -> None:
    out = _build(clips, tmp_path / "s", "--features", "mfcc", "--n-mfcc", "13")
    audio, _, length = _stored(out)
    stats = open_store_info(out).report["band_stats"]["audio"]
    frames = np.concatenate([audio[k][:, : length[k]] for k in range(len(audio))], axis=1)
    assert stats["count"] == [int(length.sum())] * 13  # every valid frame, no padded one
    np.testing.assert_allclose(stats["mean"], frames.astype(np.float64).mean(1), rtol=1e-9)
    np.testing.assert_allclose(stats["std"], frames.astype(np.float64).std(1), rtol=1e-6)
    loader = StoreLoader(out, 8, augment=AudioAugment(normalize="store"), shuffle=False,
                         drop_last=False)  # fmt: skip
    batch = next(iter(loader))
    x, steps = batch["audio"], batch["audio.length"]
    valid = torch.cat([x[k, :, : int(steps[k])] for k in range(len(x))], dim=1)
    torch.testing.assert_close(valid.mean(1), torch.zeros(13), atol=1e-4, rtol=0)
    torch.testing.assert_close(valid.std(1, unbiased=False), torch.ones(13), atol=1e-4, rtol=0)


def test_standardising_needs_stored_statistics(clips: Path, tmp_path: Path) -> None:
    wave = _build(clips, tmp_path / "w")  # a waveform: no band statistics
    assert "band_stats" not in open_store_info(wave).report
    with pytest.raises(AugmentError, match="holds waveforms, which have no bands") as err:
        StoreLoader(wave, 4, augment=AudioAugment(normalize="store"))
    assert "--features logmel or mfcc" in str(err.value) and "rebuild" not in str(err.value)
    policy: Any = AudioAugment(normalize="store")
    with pytest.raises(AugmentError, match="give the policy to a StoreLoader"):
        policy({"audio": torch.zeros(2, 13, 10), "label": torch.zeros(2, dtype=torch.int64),
                "length": torch.full((2,), 10)}, torch.Generator())  # fmt: skip
