"""The generated audio dataset (a pure function of its seed) and the classic baseline."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from benchmarks.audio_data import ClassicAudioDataset, list_audio, make_audio_dataset
from benchmarks.errors import BenchConfigError
from precompute.audio.kind import decode_audio_field
from precompute.fields import FieldSpec


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.*"))}


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_audio_dataset(tmp_path_factory.mktemp("a"), num_clips=30, num_classes=3, seed=5)


def test_the_same_seed_writes_the_same_bytes(clips: Path, tmp_path: Path) -> None:
    again = make_audio_dataset(tmp_path / "b", num_clips=30, num_classes=3, seed=5)
    assert _files(clips) == _files(again)
    other = make_audio_dataset(tmp_path / "c", num_clips=30, num_classes=3, seed=6)
    assert _files(other).keys() == _files(clips).keys() and _files(other) != _files(clips)


def test_formats_rates_channels_and_classes_are_mixed(clips: Path) -> None:
    items = list_audio(clips)
    assert len(items) == 30 and {label for _, label in items} == {0, 1, 2}
    infos = [sf.info(io.BytesIO(path.read_bytes())) for path, _ in items]
    assert {(i.format, i.subtype) for i in infos} == {
        ("WAV", "PCM_16"), ("WAV", "PCM_24"), ("FLAC", "PCM_16"), ("OGG", "VORBIS"),
        ("MP3", "MPEG_LAYER_III"),
    }  # fmt: skip
    assert {i.samplerate for i in infos} == {8000, 22050, 44100, 48000}
    assert {i.channels for i in infos} == {1, 2}
    assert all(0.45 <= i.duration <= 3.2 for i in infos)


def test_the_baseline_item_is_what_the_build_stores(clips: Path) -> None:
    ds = ClassicAudioDataset(clips)
    field = FieldSpec("audio", "audio", {"clip_seconds": 1.0, "representation": "logmel"})
    for index in (0, 3, 4, 17):
        mel, label = ds[index]
        path, want_label = list_audio(clips)[index]
        stored = decode_audio_field(path.read_bytes(), path.name, field, 1 << 26).value
        assert label == want_label and mel.shape == (64, 101) and mel.dtype == torch.float32
        np.testing.assert_allclose(stored.astype(np.float32), mel.numpy(), atol=0.07)
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    assert batch[0].shape == (4, 64, 101) and batch[1].tolist() == [0, 0, 0, 0]


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchConfigError, match="num_clips and num_classes must be >= 1, got 0, 4"):
        make_audio_dataset(tmp_path, num_clips=0)
    with pytest.raises(BenchConfigError, match=r"seconds must satisfy 0 < low <= high <= 60"):
        make_audio_dataset(tmp_path, seconds=(2.0, 1.0))
    with pytest.raises(BenchConfigError, match="no audio files under"):
        ClassicAudioDataset(tmp_path)


def test_formats_picks_the_formats_cycled(tmp_path):
    import soundfile as sf

    root = make_audio_dataset(tmp_path / "wav", num_clips=6, num_classes=2, formats=(0,))
    infos = [sf.info(str(p)) for p in sorted(root.rglob("*.*"))]
    assert len(infos) == 6 and {(i.format, i.subtype) for i in infos} == {("WAV", "PCM_16")}
    with pytest.raises(BenchConfigError, match="formats must be indices"):
        make_audio_dataset(tmp_path / "bad", num_clips=2, formats=(7,))
