"""StoreLoader over real audio stores (built from generated WAV/FLAC/OGG/MP3): batches, augment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

from benchmarks.audio_data import make_audio_dataset
from loaders import StoreLoader
from loaders.augment import AudioAugment, AugmentError, Mixup, TrainAugment
from loaders.dali.store import refuse_unserved_fields
from loaders.errors import StoreOpenError
from loaders.store.open_store import open_store
from precompute.audio.features import INT16_SCALE
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from tests.contracts.index_store import collect
from tests.loaders.v2stores import make_v2_index_store

N = 14  # clips in the store


def _build(root: Path, representation: str) -> Path:
    opts = {"clip_seconds": 0.5, "representation": representation, "n_mels": 32}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    spec = BuildSpec(size=8, shard_samples=8, chunk_samples=4, seed=1, fields=fields)
    build(str(root / "ds"), str(root / representation), spec, progress=False)
    return root / representation


@pytest.fixture(scope="module")
def stores(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A log-mel store and a waveform store of the same 14 clips in 3 classes."""
    root = tmp_path_factory.mktemp("audio")
    make_audio_dataset(root / "ds", N, 3, 2, (0.3, 1.2))
    return {r: _build(root, r) for r in ("logmel", "waveform")}


def _batches(loader: StoreLoader) -> list[dict[str, torch.Tensor]]:
    """Every batch of one epoch, as the loader hands them out (tensors)."""
    return list(loader)


def _stored(store: Path, name: str) -> np.ndarray:
    return np.asarray(zarr.open_array(str(store / name), mode="r")[:])


@pytest.mark.ray
@pytest.mark.parametrize(("kind", "shape", "dtype"), [
    ("logmel", (32, 51), torch.float16), ("waveform", (8000,), torch.int16),
])  # fmt: skip
def test_batches_serve_the_stored_values(
    stores: dict[str, Path], kind: str, shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    store = stores[kind]
    batches = _batches(StoreLoader(store, 4, seed=3, device="cpu", drop_last=False))
    keys = {"audio", "audio.length", "audio.start", "audio.truncated", "label", "index", "is_pad"}
    assert set(batches[0]) == keys
    audio, length, label = (_stored(store, n) for n in ("audio", "audio.length", "label"))
    seen = []
    for b in batches:
        assert tuple(b["audio"].shape[1:]) == shape and b["audio"].dtype == dtype
        for row, i in enumerate(b["index"].tolist()):
            if b["is_pad"][row]:
                continue
            np.testing.assert_array_equal(b["audio"][row].numpy(), audio[i])
            assert int(b["audio.length"][row]) == length[i] and int(b["label"][row]) == label[i]
            seen.append(i)
    assert sorted(set(seen)) == list(range(N))


def _policy() -> AudioAugment:
    return AudioAugment(
        crop=40, gain_db=(-6.0, 6.0), time_masks=2, time_mask_width=8, freq_masks=1,
        freq_mask_width=4, num_classes=3, mixup_alpha=0.4, cutmix_alpha=1.0,
    )  # fmt: skip


@pytest.mark.ray
def test_audio_augment_through_the_loader(stores: dict[str, Path]) -> None:
    batches = _batches(StoreLoader(stores["logmel"], 4, seed=3, device="cpu", augment=_policy()))
    b = batches[0]
    assert tuple(b["audio"].shape) == (4, 32, 40) and b["audio"].dtype == torch.float32
    assert tuple(b["label"].shape) == (4, 3)
    torch.testing.assert_close(b["label"].sum(1), torch.ones(4))
    assert b["audio.length"].dtype == torch.int64 and int(b["audio.length"].max()) <= 40
    plain = _batches(StoreLoader(stores["logmel"], 4, seed=3, device="cpu"))
    assert not torch.equal(b["audio"], plain[0]["audio"][..., :40].float())


@pytest.mark.ray
def test_a_waveform_crop_serves_clips_of_the_crop_length(stores: dict[str, Path]) -> None:
    # the gain and the noise themselves: the tests below, against the stored clips
    policy = AudioAugment(crop=4000, gain_db=(-3.0, 3.0), noise_snr_db=(10.0, 20.0))
    b = _batches(StoreLoader(stores["waveform"], 4, seed=3, device="cpu", augment=policy))[0]
    assert tuple(b["audio"].shape) == (4, 4000) and b["label"].dtype == torch.int64


def _waveforms(store: Path, augment: AudioAugment | None) -> list[dict[str, torch.Tensor]]:
    """One epoch of the waveform store, the int16 steps as floats in [-1, 1) without augment."""
    batches = _batches(StoreLoader(store, 4, seed=3, device="cpu", augment=augment))
    if augment is None:
        for b in batches:
            b["audio"] = b["audio"].to(torch.float32) / INT16_SCALE
    return batches


def _pairs(stores: dict[str, Path], augment: AudioAugment) -> list[tuple[torch.Tensor, ...]]:
    """(augmented clip, stored clip, valid length) for every clip of an epoch."""
    plain = _waveforms(stores["waveform"], None)
    out = []
    for a, p in zip(_waveforms(stores["waveform"], augment), plain, strict=True):
        assert torch.equal(a["index"], p["index"])
        torch.testing.assert_close(a["audio.length"], p["audio.length"], check_dtype=False)
        out += zip(a["audio"], p["audio"], p["audio.length"].tolist(), strict=True)
    assert len(out) >= 12
    return out


@pytest.mark.ray
@pytest.mark.parametrize("db", [-6.0, 4.5])
def test_a_gain_multiplies_each_clip_by_its_decibels(stores: dict[str, Path], db: float) -> None:
    for aug, clip, _ in _pairs(stores, AudioAugment(gain_db=(db, db))):
        torch.testing.assert_close(aug, clip * 10 ** (db / 20), rtol=1e-6, atol=0)
        assert clip.abs().max() > 0.01  # not a silent clip: the ratio says something


@pytest.mark.ray
def test_a_gain_range_draws_one_gain_per_clip_inside_it(stores: dict[str, Path]) -> None:
    gains = []
    for aug, clip, _ in _pairs(stores, AudioAugment(gain_db=(-6.0, 6.0))):
        loud = clip.abs() > 0.01
        ratio = aug[loud] / clip[loud]
        torch.testing.assert_close(ratio, ratio[:1].expand_as(ratio), rtol=1e-5, atol=0)
        gains.append(20 * np.log10(float(ratio[0])))
    assert all(-6.0 - 1e-4 <= g <= 6.0 + 1e-4 for g in gains)
    assert max(gains) - min(gains) > 1.0  # drawn per clip, not once


@pytest.mark.ray
@pytest.mark.parametrize("snr", [(10.0, 20.0), (15.0, 15.0)])
def test_noise_has_the_drawn_snr_over_the_valid_steps_only(
    stores: dict[str, Path], snr: tuple[float, float]
) -> None:
    measured = []
    for aug, clip, length in _pairs(stores, AudioAugment(noise_snr_db=snr)):
        noise = aug - clip
        assert torch.count_nonzero(noise[length:]) == 0  # padding stays silent
        signal = clip[:length].square().mean()
        measured.append(10 * float(torch.log10(signal / noise[:length].square().mean())))
    # the noise power of a few thousand Gaussian steps is within about 5 % of its own
    assert all(snr[0] - 0.5 <= m <= snr[1] + 0.5 for m in measured), measured
    if snr[0] < snr[1]:
        assert max(measured) - min(measured) > 1.0  # drawn per clip


@pytest.mark.ray
def test_resume_mid_epoch_reproduces_augmented_batches(stores: dict[str, Path]) -> None:
    kw = {"seed": 5, "device": "cpu", "augment": _policy()}
    want = collect(StoreLoader(stores["logmel"], 4, **kw))
    first = StoreLoader(stores["logmel"], 4, **kw)
    head = collect(first, limit=2)
    resumed = StoreLoader(stores["logmel"], 4, **kw)
    resumed.load_state_dict(first.state_dict())
    got = head + collect(resumed)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for key in w:
            np.testing.assert_array_equal(g[key], w[key])


@pytest.mark.ray
def test_image_policies_are_refused_on_audio(stores: dict[str, Path]) -> None:
    with pytest.raises(AugmentError, match=r"TrainAugment cannot serve the audio field 'audio'"):
        StoreLoader(stores["logmel"], 4, augment=TrainAugment(8))
    with pytest.raises(AugmentError, match=r"mixup=Mixup cannot mix the audio field"):
        StoreLoader(stores["logmel"], 4, augment=AudioAugment(), mixup=Mixup(3, 0.2))
    with pytest.raises(AugmentError, match=r"label field has 3 classes; AudioAugment\(num_"):
        StoreLoader(stores["logmel"], 4, augment=AudioAugment(num_classes=5, mixup_alpha=0.2))


def test_audio_augment_on_an_image_store_is_refused(tmp_path: Path) -> None:
    store = make_v2_index_store(tmp_path / "img", 8)
    with pytest.raises(AugmentError, match="AudioAugment needs a field of kind audio"):
        StoreLoader(store, 4, augment=AudioAugment())


@pytest.mark.ray
def test_dali_refuses_an_audio_store_naming_the_field(stores: dict[str, Path]) -> None:
    source = open_store(stores["logmel"])
    try:
        with pytest.raises(StoreOpenError, match=r"'audio' \(audio\)"):
            refuse_unserved_fields(source)
    finally:
        source.close()


def test_audio_augment_on_a_v1_store_is_refused(tmp_path: Path) -> None:
    images = np.zeros((8, 8, 8, 3), np.uint8)
    write_store_from_arrays(tmp_path / "v1", images, np.arange(8) % 2, BuildSpec(size=8))
    with pytest.raises(AugmentError, match=r"AudioAugment needs a field of kind audio; .* \[\]"):
        StoreLoader(tmp_path / "v1", 4, augment=AudioAugment())


@pytest.mark.ray
def test_audio_augment_on_a_store_that_keeps_channels_is_refused(
    ray_local: None, tmp_path: Path
) -> None:
    """Its ops read (B, C, L) as (B, n_mels, frames): a frequency mask would zero channels."""
    make_audio_dataset(tmp_path / "ds", 4, 2, 2, (0.3, 0.6))
    opts = {"clip_seconds": 0.2, "representation": "waveform", "channels": 2}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    spec = BuildSpec(size=8, shard_samples=8, chunk_samples=4, seed=1, fields=fields)
    build(str(tmp_path / "ds"), str(tmp_path / "s"), spec, progress=False)
    policy = AudioAugment(freq_masks=1, freq_mask_width=2)
    with pytest.raises(AugmentError, match=r"AudioAugment serves mono audio; the field 'audio' "
                       r"keeps 2 channels: build with --channels mono"):  # fmt: skip
        StoreLoader(tmp_path / "s", 2, augment=policy)
    batch = next(iter(StoreLoader(tmp_path / "s", 2, augment=None)))
    assert tuple(batch["audio"].shape[:2]) == (2, 2)  # still served as stored
