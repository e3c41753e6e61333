"""The synthetic hyperspectral scene: deterministic, Indian-Pines-shaped, and its baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from benchmarks.errors import BenchConfigError
from benchmarks.spectral_data import (
    ArrayFileDataset,
    MemmapDataset,
    make_scene,
    write_patch_memmap,
    write_patches,
    write_scene,
)
from precompute.arrays.readers import read_array
from precompute.arrays.scene import scene_patches
from precompute.arrays.sources import list_arrays


def test_the_default_scene_is_indian_pines_shaped_and_deterministic() -> None:
    scene, gt = make_scene()
    assert scene.shape == (145, 145, 200) and scene.dtype == np.float32 and gt.dtype == np.uint8
    assert set(np.unique(gt)) == set(range(17))  # 16 classes + unlabelled
    assert 0.3 < (gt > 0).mean() < 0.7
    again, gt2 = make_scene()
    assert again.tobytes() == scene.tobytes() and gt2.tobytes() == gt.tobytes()
    assert make_scene(seed=1)[0].tobytes() != scene.tobytes()


def test_classes_have_distinct_spectra_and_blobs_are_spatial() -> None:
    scene, gt = make_scene(40, 40, 30, classes=4, seed=2, unlabelled=0.0)
    means = np.stack([scene[gt == c].mean(axis=0) for c in range(1, 5)])
    assert np.abs(means[:, None] - means[None]).max(axis=2)[~np.eye(4, dtype=bool)].min() > 0.05
    same_as_right = (gt[:, 1:] == gt[:, :-1]).mean()
    assert same_as_right > 0.9  # blobs, not salt and pepper


def test_scene_files_read_back_exactly(tmp_path: Path) -> None:
    scene, gt = make_scene(20, 18, 12, classes=3, seed=4)
    paths = write_scene(tmp_path, scene, gt)
    assert sorted(p.name for p in paths) == sorted(
        f"{n}.{e}" for n in ("scene", "gt") for e in ("mat", "npy", "tif")
    )
    for path in paths:
        got = read_array(path.read_bytes(), path.name, path.name)
        want = scene if path.stem == "scene" else gt
        assert np.array_equal(got.reshape(want.shape), want) and got.dtype == want.dtype


@pytest.mark.parametrize("fmt", ["npy", "mat"])
def test_the_per_file_dataset_serves_the_scene_patches(tmp_path: Path, fmt: str) -> None:
    scene, gt = make_scene(16, 16, 8, classes=3, seed=5)
    paths = write_patches(tmp_path / fmt, scene, gt, 5, fmt)
    want = list(scene_patches(scene, gt, 5))
    assert len(paths) == len(want) == int((gt > 0).sum())
    ds = ArrayFileDataset(tmp_path / fmt)
    assert len(ds) == len(want) and len(list_arrays(tmp_path / fmt).items) == len(want)
    by_key = {(p.row, p.col): p for p in want}
    for i in (0, len(ds) // 2, len(ds) - 1):
        x, label = ds[i]
        row, col = map(int, ds.files[i].stem.split("_"))
        assert x.shape == (8, 5, 5) and x.dtype == torch.float32
        assert label == by_key[(row, col)].label
        assert torch.equal(x, torch.from_numpy(by_key[(row, col)].values).permute(2, 0, 1))
    xb, yb = next(iter(DataLoader(ds, batch_size=4, num_workers=0)))
    assert xb.shape == (4, 8, 5, 5) and yb.dtype == torch.int64


def test_the_memmap_reference_holds_the_same_bytes(tmp_path: Path) -> None:
    scene, gt = make_scene(12, 12, 6, classes=2, seed=6)
    labels = write_patch_memmap(tmp_path / "all.npy", scene, gt, 3)
    want = list(scene_patches(scene, gt, 3))
    ds = MemmapDataset(tmp_path / "all.npy", labels)
    assert len(ds) == len(want)
    for i in (0, len(ds) - 1):
        x, label = ds[i]
        assert label == want[i].label
        assert torch.equal(
            x, torch.from_numpy(np.ascontiguousarray(want[i].values)).permute(2, 0, 1)
        )


def test_bad_generator_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchConfigError, match=r"classes must be in \[1, 254\], got 0"):
        make_scene(classes=0)
    with pytest.raises(BenchConfigError, match=r"fmt must be 'npy' or 'mat', got 'h5'"):
        write_patches(tmp_path, *make_scene(8, 8, 2, classes=2), 3, "h5")
