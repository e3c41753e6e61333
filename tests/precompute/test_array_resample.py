"""Per-band resampling: bit-exact at the same size, torch's antialiased float64 otherwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from precompute.arrays.resample import place_array, resample_bands
from precompute.errors import SpecError
from precompute.fields.geometry import place_image, placement

RNG = np.random.default_rng(3)


def _torch(cube: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    x = torch.from_numpy(cube.astype(np.float64)).permute(2, 0, 1)[None]
    y = F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False)
    return y[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint16", "int16", "uint8"])
def test_the_same_size_returns_the_values_bit_exact(dtype: str) -> None:
    cube = (RNG.normal(size=(9, 7, 30)) * 1000).astype(dtype)
    out = resample_bands(cube, (9, 7))
    assert out.dtype == cube.dtype and out.tobytes() == cube.tobytes()
    assert out is not cube


@pytest.mark.parametrize("size", [(16, 11), (50, 60), (37, 10), (1, 1)])
def test_another_size_is_torch_antialiased_bilinear_in_float64(size: tuple[int, int]) -> None:
    cube = RNG.normal(size=(37, 29, 5))
    np.testing.assert_allclose(resample_bands(cube, size), _torch(cube, size), atol=1e-12)


def test_integers_are_rounded_in_their_own_range_never_through_8_bits() -> None:
    cube = (40000 + RNG.integers(0, 20000, size=(20, 20, 3))).astype(np.uint16)
    out = resample_bands(cube, 7)
    assert out.dtype == np.uint16 and out.shape == (7, 7, 3)
    assert np.array_equal(out, np.rint(_torch(cube, (7, 7))).astype(np.uint16))
    assert out.min() >= cube.min() and out.max() <= cube.max() and out.min() > 255
    flat = np.full((10, 10, 2), 51234, dtype=np.uint16)
    assert np.array_equal(resample_bands(flat, 3), np.full((3, 3, 2), 51234, dtype=np.uint16))


def test_float32_is_computed_in_float64_and_cast_once() -> None:
    cube = (1e6 + RNG.normal(size=(12, 12, 4))).astype(np.float32)
    out = resample_bands(cube, 5)
    assert out.dtype == np.float32
    assert np.array_equal(out, _torch(cube, (5, 5)).astype(np.float32))


@pytest.mark.parametrize("mode", ["squash", "center-crop", "letterbox"])
@pytest.mark.parametrize("frame", [(30, 21), (21, 30), (17, 17)])
def test_placement_matches_the_image_rule_of_the_same_placement(
    mode: str, frame: tuple[int, int]
) -> None:
    w, h = frame
    y, x = np.mgrid[0:h, 0:w]
    cube = np.stack([x * 8, y * 8, (x + y) * 4], -1).astype(np.uint8)  # smooth ramps
    p = placement(w, h, 12, mode)
    out = place_array(cube, p, 0)
    image = place_image(cube, p, 0)
    assert out.shape == (12, 12, 3) and out.dtype == np.uint8
    assert np.abs(out.astype(int) - image.astype(int)).max() <= 1
    top, left, eh, ew = p.extent
    inside = np.zeros((12, 12), bool)
    inside[top : top + eh, left : left + ew] = True
    assert (out[~inside] == 0).all()


def test_letterbox_pads_with_the_given_value_and_keeps_float_values() -> None:
    cube = RNG.normal(size=(10, 20, 6)).astype(np.float32)
    p = placement(20, 10, 20, "letterbox")
    out = place_array(cube, p, -1.0)
    assert out.dtype == np.float32 and p.extent == (5, 0, 10, 20)
    assert out[5:15].tobytes() == cube.tobytes() and (out[:5] == -1).all()


@pytest.mark.parametrize(
    ("cube", "size", "why"),
    [
        (np.zeros((4, 4)), 2, r"\(H, W, C\).*\[4, 4\]"),
        (np.zeros((4, 4, 2), complex), 2, r"real numbers, got dtype complex128"),
        (np.zeros((4, 4, 2)), 0, r"size must be >= 1, got 0"),
    ],
)
def test_bad_cubes_and_sizes_are_refused(cube: np.ndarray, size: int, why: str) -> None:
    with pytest.raises(SpecError, match=why):
        resample_bands(cube, size)
