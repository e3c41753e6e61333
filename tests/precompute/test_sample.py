"""The sample dataset: real image files, deterministic, every odd mode present."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.sample import CLASS_NAMES, make_sample_dataset


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_deterministic_and_seed_dependent(tmp_path: Path) -> None:
    a = make_sample_dataset(tmp_path / "a", 12, size_range=(16, 32), seed=3)
    b = make_sample_dataset(tmp_path / "b", 12, size_range=(16, 32), seed=3)
    c = make_sample_dataset(tmp_path / "c", 12, size_range=(16, 32), seed=4)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_files_modes_and_manifest(tmp_path: Path) -> None:
    root = make_sample_dataset(tmp_path, 40, num_classes=4, size_range=(16, 48), manifest=True)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == list(CLASS_NAMES[:4])
    modes = set()
    for p in root.rglob("*.*"):
        if p.suffix in (".jpg", ".png"):
            with Image.open(p) as im:
                assert im.format == ("JPEG" if p.suffix == ".jpg" else "PNG")
                assert 16 <= im.width <= 48 and 16 <= im.height <= 48
                modes.add(im.mode)
                if im.getexif().get(0x0112, 1) != 1:
                    modes.add("EXIF")
    assert {"RGB", "L", "LA", "RGBA", "P", "CMYK", "I;16", "EXIF"} <= modes
    with open(root / "manifest.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 40
    for i, row in enumerate(rows):
        assert int(row["label"]) == i % 4
        assert row["path"].split("/")[0] == CLASS_NAMES[i % 4]
        assert (root / row["path"]).is_file()


def test_classes_differ(tmp_path: Path) -> None:
    root = make_sample_dataset(tmp_path, 40, num_classes=2, size_range=(32, 32))
    means = []
    for name in CLASS_NAMES[:2]:
        files = [p for p in sorted((root / name).iterdir()) if p.suffix == ".jpg"]
        px = [np.asarray(Image.open(p).convert("RGB"), dtype=np.float64) for p in files]
        means.append(np.mean([x.mean(axis=(0, 1)) for x in px], axis=0))
    assert np.abs(means[0] - means[1]).max() > 5


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_images"):
        make_sample_dataset(tmp_path, 0)
    with pytest.raises(ValueError, match="size_range"):
        make_sample_dataset(tmp_path, 3, size_range=(40, 20))
