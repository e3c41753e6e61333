"""Scene + ground truth -> patches (reflect padding, row-major), and the block split."""

from __future__ import annotations

import numpy as np
import pytest

from precompute.arrays.scene import block_split, scene_patches
from precompute.errors import SourceError, SpecError

H, W, C = 7, 9, 3


def _scene() -> np.ndarray:
    r, c, b = np.meshgrid(np.arange(H), np.arange(W), np.arange(C), indexing="ij")
    return (r * 1000 + c * 10 + b).astype(np.int32)  # each value names its pixel and band


def _reflect(i: int, n: int) -> int:
    return -i if i < 0 else 2 * (n - 1) - i if i >= n else i


def _expected(scene: np.ndarray, r: int, c: int, p: int) -> np.ndarray:
    rows = [_reflect(r - p // 2 + i, H) for i in range(p)]
    cols = [_reflect(c - p // 2 + j, W) for j in range(p)]
    return scene[np.ix_(rows, cols)]


def _gt() -> np.ndarray:
    gt = np.zeros((H, W), np.uint8)
    gt[0, 0], gt[0, 8], gt[3, 4], gt[6, 1], gt[6, 8] = 1, 3, 2, 16, 1
    return gt


@pytest.mark.parametrize("p", [1, 3, 5, 4])
def test_one_patch_per_labelled_pixel_row_major_with_reflect_padding(p: int) -> None:
    scene, gt = _scene(), _gt()
    patches = list(scene_patches(scene, gt, p))
    assert [(x.row, x.col, x.label) for x in patches] == [
        (0, 0, 0), (0, 8, 2), (3, 4, 1), (6, 1, 15), (6, 8, 0)
    ]  # fmt: skip
    for x in patches:
        assert x.values.shape == (p, p, C) and x.values.dtype == np.int32
        assert not x.values.flags.writeable
        assert np.array_equal(x.values, _expected(scene, x.row, x.col, p))
        assert np.array_equal(x.values[p // 2, p // 2], scene[x.row, x.col])  # the centre


def test_the_corner_patch_mirrors_without_repeating_the_border() -> None:
    corner = next(scene_patches(_scene(), _gt(), 3))
    assert corner.values[0, 0, 0] == 1010 and corner.values[1, 1, 0] == 0  # (1, 1) mirrored


@pytest.mark.parametrize(
    ("scene", "gt", "why"),
    [
        (
            np.zeros((7, 9, 3)),
            np.ones((7, 8), int),
            r"ground truth is \[7, 8\] but the scene is \[7, 9\]",
        ),
        (np.zeros((7, 9)), np.ones((7, 9), int), r"scene must be \(H, W, C\), got shape \[7, 9\]"),
        (np.zeros((7, 9, 3)), np.full((7, 9), 1.5), r"integers >= 0, got 1\.5 at pixel \(row 0"),
        (np.zeros((7, 9, 3)), np.full((7, 9), np.nan), r"integers >= 0, got nan at pixel"),
        (np.zeros((7, 9, 3)), np.ones((7, 9), complex), r"integers >= 0, got dtype complex128"),
        (np.zeros((7, 9, 3)), -np.ones((7, 9), int), r"integers >= 0"),
    ],
)
def test_a_ground_truth_that_does_not_fit_the_scene_is_refused(
    scene: np.ndarray, gt: np.ndarray, why: str
) -> None:
    with pytest.raises(SourceError, match=rf"^pines\.mat: .*{why}"):
        list(scene_patches(scene, gt, 3, where="pines.mat"))


def test_a_bad_patch_size_is_refused() -> None:
    with pytest.raises(SpecError, match=r"patch must be a positive integer, got 0"):
        list(scene_patches(_scene(), _gt(), 0))


def _blobs(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 5, size=(60, 70))


def test_the_split_is_by_whole_blocks_and_a_pure_function() -> None:
    gt = _blobs()
    split = block_split(gt, 10, 0.25, seed=1)
    assert split.shape == gt.shape and set(np.unique(split)) == {"test", "train"}
    assert np.array_equal(split, block_split(gt.copy(), 10, 0.25, seed=1))
    assert not np.array_equal(split, block_split(gt, 10, 0.25, seed=2))
    blocks = split.reshape(6, 10, 7, 10).transpose(0, 2, 1, 3).reshape(42, 100)
    assert all(len(set(b)) == 1 for b in blocks)
    labelled = gt > 0
    share = (labelled & (split == "test")).sum() / labelled.sum()
    assert 0.25 <= share < 0.25 + 100 / labelled.sum()  # at most one block over


def test_a_guard_band_keeps_train_and_test_patches_apart() -> None:
    gt, p = _blobs(), 5
    split = block_split(gt, 10, 0.3, seed=0, guard=p - 1)
    test = np.argwhere((split == "test") & (gt > 0))
    train = np.argwhere((split == "train") & (gt > 0))
    assert len(test) and len(train) and (split == "guard").any()
    gap = np.abs(test[:, None, :] - train[None, :, :]).max(axis=2)  # Chebyshev distances
    assert gap.min() >= p  # patches of side p centred this far apart share no pixel
    unguarded = block_split(gt, 10, 0.3, seed=0)
    assert np.array_equal(unguarded == "test", split == "test")


def test_zero_test_fraction_puts_everything_in_train() -> None:
    assert (block_split(_blobs(), 8, 0.0, seed=0) == "train").all()


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"block": 0}, r"block must be a positive integer, got 0"),
        ({"test_fraction": 1.0}, r"test_fraction must be in \[0, 1\), got 1.0"),
        ({"guard": -1}, r"guard must be an integer >= 0, got -1"),
    ],
)
def test_bad_split_arguments_are_refused(kw: dict[str, object], why: str) -> None:
    args: dict[str, object] = {"block": 8, "test_fraction": 0.2, "seed": 0, **kw}
    with pytest.raises(SpecError, match=why):
        block_split(_blobs(), **args)  # type: ignore[arg-type]
