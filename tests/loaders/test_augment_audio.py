"""AudioAugment on batches of real decoded files: determinism, exact gain, SNR, masks, mixing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from loaders.augment.audio.policy import AudioAugment
from loaders.augment.errors import AugmentError
from precompute.audio.features import from_int16
from precompute.audio.kind import decode_audio_field
from precompute.fields import FieldSpec

# (seconds, rate, channels, format, subtype): short clips get padded, long ones cropped
FILES = [
    (0.40, 8000, 1, "WAV", "PCM_16"),
    (1.30, 44100, 2, "FLAC", "PCM_24"),
    (0.75, 22050, 1, "OGG", "VORBIS"),
    (1.00, 48000, 2, "MP3", "MPEG_LAYER_III"),
    (0.20, 16000, 1, "WAV", "FLOAT"),
    (0.90, 16000, 2, "WAV", "PCM_32"),
]


def _batch(tmp_path: Path, representation: str) -> dict[str, torch.Tensor]:
    """Real files written by soundfile, decoded into a store field's values."""
    field = FieldSpec("audio", "audio", {"clip_seconds": 1.0, "representation": representation})
    values, lengths = [], []
    for i, (sec, rate, ch, fmt, sub) in enumerate(FILES):
        t = np.arange(round(sec * rate)) / rate
        wave = np.stack([0.5 * np.sin(2 * np.pi * (300 + 150 * i) * t)] * ch, axis=1)
        path = tmp_path / f"clip{i}.{fmt.lower()}"
        sf.write(path, wave.astype(np.float32), rate, format=fmt, subtype=sub)
        out = decode_audio_field(path.read_bytes(), path.name, field, 1 << 26)
        values.append(out.value)
        lengths.append(out.length)
    return {
        "audio": torch.from_numpy(np.stack(values)),
        "label": torch.arange(len(FILES)) % 4,
        "length": torch.tensor(lengths, dtype=torch.int32),
    }


@pytest.fixture(scope="module")
def waves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    return _batch(tmp_path_factory.mktemp("wav"), "waveform")


@pytest.fixture(scope="module")
def mels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    return _batch(tmp_path_factory.mktemp("mel"), "logmel")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_empty_policy_serves_the_stored_values(waves, mels) -> None:
    out = AudioAugment()(waves, _gen())
    assert out["audio"].dtype == torch.float32 and waves["audio"].dtype == torch.int16
    np.testing.assert_array_equal(out["audio"].numpy(), from_int16(waves["audio"].numpy()))
    assert torch.equal(out["label"], waves["label"])
    assert torch.equal(out["length"], waves["length"].long())
    feat = AudioAugment()(mels, _gen())
    assert torch.equal(feat["audio"], mels["audio"].float())


FULL = AudioAugment(
    crop=12000, gain_db=(-6.0, 6.0), noise_snr_db=(5.0, 30.0), time_masks=2,
    time_mask_width=800, num_classes=4, mixup_alpha=0.4, cutmix_alpha=1.0,
)  # fmt: skip


def test_a_fixed_generator_gives_the_same_batch(waves) -> None:
    a, b = FULL(waves, _gen(3)), FULL(waves, _gen(3))
    c = FULL(waves, _gen(4))
    for key in ("audio", "length", "label"):
        assert torch.equal(a[key], b[key])
    assert not torch.equal(a["audio"], c["audio"])
    assert a["audio"].shape == (len(FILES), 12000) and a["label"].shape == (len(FILES), 4)
    torch.testing.assert_close(a["label"].sum(1), torch.ones(len(FILES)))


def test_round_trips_through_json() -> None:
    assert AudioAugment.from_dict(json.loads(json.dumps(FULL.to_dict()))) == FULL


def test_gain_is_exact(waves, mels) -> None:
    out = AudioAugment(gain_db=(6.0, 6.0))(waves, _gen())
    x = torch.from_numpy(from_int16(waves["audio"].numpy()))
    torch.testing.assert_close(out["audio"], x * 10 ** (6 / 20), rtol=1e-6, atol=0)
    feat = AudioAugment(gain_db=(-3.5, -3.5))(mels, _gen())
    torch.testing.assert_close(feat["audio"], mels["audio"].float() - 3.5, rtol=0, atol=1e-5)


def _valid(x: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    return torch.arange(x.shape[-1])[None, :] < length[:, None]


@pytest.mark.parametrize("snr", [0.0, 10.0, 25.0])
def test_noise_has_the_asked_snr_over_the_valid_length(waves, snr: float) -> None:
    out = AudioAugment(noise_snr_db=(snr, snr))(waves, _gen(1))
    x = torch.from_numpy(from_int16(waves["audio"].numpy()))
    noise, valid = out["audio"] - x, _valid(x, waves["length"])
    assert not noise[~valid].any()  # nothing added in the padding
    for i in range(len(FILES)):
        n = int(waves["length"][i])
        got = 10 * torch.log10(x[i, :n].square().mean() / noise[i, :n].square().mean())
        assert abs(float(got) - snr) < 0.4, (i, float(got))


def test_random_crop_is_a_window_of_the_valid_clip(waves) -> None:
    x = torch.from_numpy(from_int16(waves["audio"].numpy()))
    out = AudioAugment(crop=4000)(waves, _gen(2))
    for i in range(len(FILES)):
        n, got = int(waves["length"][i]), out["audio"][i]
        starts = [s for s in range(max(n - 4000, 0) + 1) if torch.equal(x[i, s : s + 4000], got)]
        assert starts, i
        assert int(out["length"][i]) == min(n - starts[0], 4000)


def test_time_masks_stay_inside_the_valid_length(mels) -> None:
    policy = AudioAugment(time_masks=3, time_mask_width=20, freq_masks=2, freq_mask_width=8,
                          mask_value=-999.0)  # fmt: skip
    hits = 0
    for seed in range(20):
        out = policy(mels, _gen(seed))["audio"]
        masked = out == -999.0  # (B, n_mels, frames)
        time_hit = masked.all(1)  # whole columns: time masks
        band_hit = masked.all(2)  # whole rows: frequency masks
        assert not (time_hit & ~_valid(out, mels["length"])).any()
        assert torch.equal(masked, time_hit[:, None, :] | band_hit[:, :, None])
        assert int(band_hit.sum(1).max()) <= 16 and int(time_hit.sum(1).max()) <= 60
        hits += int(time_hit.sum())
    assert hits > 0


def test_masks_of_features_default_to_each_clips_floor(mels) -> None:
    # a stored log-mel lies around -70..+26 dB: a 0 is a loud stripe; the default is silence
    policy = AudioAugment(time_masks=2, time_mask_width=30, freq_masks=2, freq_mask_width=10)
    x = mels["audio"].float()
    floor = torch.where(_valid(x, mels["length"])[:, None, :], x, torch.inf).flatten(1).amin(1)
    out = policy(mels, _gen(3))["audio"]
    changed = out != x
    assert changed.any()
    for i in range(x.shape[0]):
        assert float(floor[i]) < -20  # the clip's floor is far below 0 dB
        assert torch.equal(out[i][changed[i]], torch.full_like(out[i][changed[i]], floor[i]))
    assert not (out == 0).any()


def test_masks_of_waveforms_default_to_zero_and_a_number_is_kept(waves) -> None:
    x = torch.from_numpy(from_int16(waves["audio"].numpy()))
    policy = {"time_masks": 2, "time_mask_width": 400}
    marked = AudioAugment(**policy, mask_value=0.25)(waves, _gen(1))["audio"]
    spans = marked == 0.25  # the same draws: the spans the default masks too
    assert spans.any() and torch.equal(marked[~spans], x[~spans])
    out = AudioAugment(**policy)(waves, _gen(1))["audio"]
    assert not out[spans].any()  # masked steps of a waveform are silence: 0
    assert torch.equal(out[~spans], x[~spans])
    assert AudioAugment.from_dict(AudioAugment(mask_value="min").to_dict()).mask_value == "min"
    with pytest.raises(AugmentError, match="mask_value must be a number, 'min' or None"):
        AudioAugment(mask_value="floor")


def test_cutmix_mixes_labels_by_the_pasted_time_fraction() -> None:
    b, t = 6, 1000
    batch = {
        "audio": (torch.arange(1, b + 1, dtype=torch.float32)[:, None]).expand(b, t).contiguous(),
        "label": torch.arange(b),
        "length": torch.full((b,), t),
    }
    policy = AudioAugment(num_classes=b, cutmix_alpha=1.0)
    for seed in range(10):
        out = policy(batch, _gen(seed))
        pasted = (out["audio"] != batch["audio"]).float().mean(1)
        own = out["label"][torch.arange(b), torch.arange(b)]
        torch.testing.assert_close(own, 1 - pasted)
        torch.testing.assert_close(out["label"].sum(1), torch.ones(b))


def test_mixup_blends_clips_and_labels_with_one_lambda(mels) -> None:
    out = AudioAugment(num_classes=4, mixup_alpha=1.0)(mels, _gen(5))
    x = mels["audio"].float()
    lam = out["label"][0, int(mels["label"][0])]  # labels 0 and 1 of the partners differ
    torch.testing.assert_close(out["audio"], torch.lerp(x.flip(0), x, lam), rtol=1e-5, atol=1e-4)
    assert torch.equal(out["length"], torch.maximum(mels["length"], mels["length"].flip(0)).long())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"crop": 0}, r"audio\.crop must be an integer in \[1, 2147483647\], got 0"),
        ({"gain_db": (5.0, 1.0)}, r"audio\.gain_db low 5\.0 is above high 1\.0"),
        ({"gain_db": (0, 90)}, r"audio\.gain_db must be a number in \[-60, 60\], got 90"),
        ({"noise_snr_db": 10}, r"audio\.noise_snr_db must be a \(low, high\) pair of dB, got 10"),
        ({"time_masks": 2}, r"audio\.time_masks needs time_mask_width >= 1"),
        ({"freq_masks": -1}, r"audio\.freq_masks must be an integer in \[0, 32\], got -1"),
        (
            {"mixup_alpha": 0.2},
            r"audio\.num_classes must be an integer in \[1, 16777216\], got None",
        ),
        ({"mix_prob": 1.5}, r"audio\.mix_prob must be a number in \[0, 1\], got 1\.5"),
        (
            {"num_classes": 1, "mixup_alpha": 0.4},
            r"audio mixing needs num_classes >= 2: with one class every mixed target is 1\.0",
        ),
        ({"num_classes": 1, "cutmix_alpha": 1.0}, r"audio mixing needs num_classes >= 2"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs, message: str) -> None:
    with pytest.raises(AugmentError, match=message):
        AudioAugment(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"mask_value": 10**400},
            r"audio\.mask_value must be a number in \[-10000, 10000\], got 10+\.\.\.$",
        ),
        (
            {"gain_db": (0.0, 10**400)},
            r"audio\.gain_db must be a number in \[-60, 60\], got 10+\.\.\.$",
        ),
        ({"crop": 10**5000}, r"audio\.crop must be .*, got <an integer of 16610 bits>$"),
        ({"mix_prob": float("nan")}, r"audio\.mix_prob must be a number in \[0, 1\], got nan$"),
    ],
)
def test_huge_and_nan_numbers_are_refused_by_name(kwargs, message: str) -> None:
    # one set of checkers (loaders.augment.checks): no OverflowError, no failing repr
    with pytest.raises(AugmentError, match=message):
        AudioAugment(**kwargs)


def test_bad_batches_are_refused(waves, mels) -> None:
    with pytest.raises(AugmentError, match=r"audio\.noise_snr_db needs waveforms"):
        AudioAugment(noise_snr_db=(1.0, 2.0))(mels, _gen())
    with pytest.raises(AugmentError, match=r"audio\.freq_masks needs features"):
        AudioAugment(freq_masks=1, freq_mask_width=2)(waves, _gen())
    with pytest.raises(AugmentError, match=r"audio\.crop 20000 is longer than the stored 16000"):
        AudioAugment(crop=20000)(waves, _gen())
    with pytest.raises(AugmentError, match=r"audio batch lacks \['length'\]"):
        AudioAugment()({"audio": waves["audio"], "label": waves["label"]}, _gen())
    with pytest.raises(AugmentError, match=r"audio: unknown field\(s\) \['speed'\]"):
        AudioAugment.from_dict({"speed": 1.1})
    with pytest.raises(AugmentError, match=r"audio mixing: label 2 of sample 2 is not in \[0, 2\)"):
        AudioAugment(num_classes=2, mixup_alpha=1.0)(waves, _gen())


@pytest.mark.gpu
def test_cuda_matches_the_rules(waves) -> None:
    cuda = {k: v.cuda() for k, v in waves.items()}
    gen = lambda: torch.Generator(device="cuda").manual_seed(9)  # noqa: E731
    a, b = FULL(cuda, gen()), FULL(cuda, gen())
    assert a["audio"].is_cuda and torch.equal(a["audio"], b["audio"])
    out = AudioAugment(gain_db=(6.0, 6.0))(cuda, gen())
    x = torch.from_numpy(from_int16(waves["audio"].numpy())).cuda()
    torch.testing.assert_close(out["audio"], x * 10 ** (6 / 20), rtol=1e-6, atol=0)


def test_a_range_given_as_a_list_is_taken_as_the_image_ranges_are() -> None:
    listed = AudioAugment(gain_db=[-6, 6], noise_snr_db=[10.0, 30.0])
    assert listed == AudioAugment(gain_db=(-6, 6), noise_snr_db=(10.0, 30.0))
    assert hash(listed) == hash(AudioAugment(gain_db=(-6, 6), noise_snr_db=(10.0, 30.0)))
    with pytest.raises(AugmentError, match=r"audio\.gain_db must be a \(low, high\) pair of dB"):
        AudioAugment(gain_db=[-6, 0, 6])
