"""`StoreLoader(keys=True)`: every batch names each sample's source file, for every kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaders import StoreLoader
from precompute.cli import main
from precompute.sample import make_sample_dataset
from tests.precompute.audio_bytes import encode, tone


def _build(src: Path, out: Path, *flags: str) -> Path:
    main(["build", str(src), "--out", str(out), "--runner", "sequential", "--quiet", *flags])
    return out


def _audio(root: Path) -> Path:
    for c, name in enumerate(["cat", "dog"]):
        for i in range(5):
            path = root / name / f"{i}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode(tone(200 + 50 * c + 7 * i, 8000, 0.2), 8000, "wav16"))
    return root


def test_image_batches_name_the_file_of_every_sample(tmp_path: Path) -> None:
    src = make_sample_dataset(tmp_path / "src", 22, num_classes=3, size_range=(16, 24))
    store = _build(
        src, tmp_path / "s.zarr", "--size", "16", "--shard-samples", "8", "--chunk-samples", "4"
    )
    classes = sorted(p.name for p in src.iterdir() if p.is_dir())
    seen = []
    for batch in StoreLoader(store, 5, keys=True, drop_last=False, seed=3):
        assert len(batch["key"]) == len(batch["index"])
        for key, label in zip(batch["key"], batch["label"].tolist(), strict=True):
            assert (src / key).is_file()
            assert key.split("/")[0] == classes[label]  # the file of that sample, not another
        seen += batch["key"]
    assert sorted(seen) == sorted(p.relative_to(src).as_posix() for p in src.rglob("*.*"))
    assert "key" not in next(iter(StoreLoader(store, 5)))


def test_audio_batches_name_the_recording_of_every_clip(tmp_path: Path) -> None:
    src = _audio(tmp_path / "src")
    store = _build(src, tmp_path / "a.zarr", "--clip-seconds", "0.1")
    batches = list(StoreLoader(store, 4, keys=True, drop_last=False, shuffle=False))
    keys = [k for b in batches for k in b["key"]]
    labels = [lab for b in batches for lab in b["label"].tolist()]
    assert sorted(keys) == sorted(f"{c}/{i}.wav" for c in ("cat", "dog") for i in range(5))
    assert all(k.startswith(("cat/", "dog/")[lab]) for k, lab in zip(keys, labels, strict=True))


@pytest.mark.parametrize("io", ["pread", "ram"])
def test_keys_follow_the_batches_in_every_io_mode(tmp_path: Path, io: str) -> None:
    src = make_sample_dataset(tmp_path / "src", 12, num_classes=2, size_range=(16, 20))
    store = _build(src, tmp_path / "s.zarr", "--size", "16")
    plain = [b["index"].tolist() for b in StoreLoader(store, 4, io=io, seed=1)]
    keyed = list(StoreLoader(store, 4, io=io, seed=1, keys=True))
    assert [b["index"].tolist() for b in keyed] == plain
    assert all(len(set(b["key"])) == len(b["key"]) for b in keyed)
