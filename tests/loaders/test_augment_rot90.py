"""Rotate-90 per sample, one draw for every spatial field: images, masks and keypoints agree."""

from __future__ import annotations

import pytest
import torch

from loaders.augment.arrays.rot90 import (
    ROT90,
    draw_k,
    rot90_images,
    rot90_keypoints,
    rot90_masks,
    rotate_field,
)
from loaders.augment.errors import AugmentError
from tests.loaders.devices import DEVICES

N = 7


def _k(device: str) -> torch.Tensor:
    return torch.tensor([0, 1, 2, 3, 1, 3], device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint16, torch.float32, torch.float64])
def test_images_and_arrays_rotate_like_torch_rot90_per_sample(
    device: str, dtype: torch.dtype
) -> None:
    x = (torch.arange(6 * 5 * N * N, dtype=torch.float64) * 3.5).reshape(6, 5, N, N)
    x = x.to(dtype).to(device)
    k = _k(device)
    out = rot90_images(x, k)
    assert out.dtype == dtype and out.shape == x.shape and out.device == x.device
    for b in range(6):
        want = torch.rot90(x[b].double(), int(k[b]), dims=(1, 2))  # rot90 lacks uint16
        assert torch.equal(out[b].double(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_masks_rotate_with_their_values_and_dtype_kept(device: str) -> None:
    m = torch.randint(0, 255, (6, N, N), dtype=torch.uint8, device=device)
    out = rot90_masks(m, _k(device))
    for b in range(6):
        assert torch.equal(out[b], torch.rot90(m[b], int(_k(device)[b]), dims=(0, 1)))


@pytest.mark.parametrize("device", DEVICES)
def test_a_keypoint_at_a_pixel_centre_lands_on_the_rotated_pixels_centre(device: str) -> None:
    k = _k(device)
    ids = torch.arange(N * N, device=device).reshape(N, N)
    image = ids[None, None].expand(6, 1, N, N).contiguous()
    rows, cols = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    centres = torch.stack([cols.flatten() + 0.5, rows.flatten() + 0.5, torch.ones(N * N)], -1)
    points = centres[None].expand(6, -1, -1).to(device)
    rotated = rotate_field("bilinear", image, k, N)
    moved = rotate_field("affine", points, k, N)
    for b in range(6):
        x, y = moved[b, :, 0], moved[b, :, 1]
        assert torch.equal(x - x.floor(), torch.full_like(x, 0.5))  # still pixel centres
        shown = rotated[b, 0, y.long(), x.long()]
        assert torch.equal(shown, ids.flatten())  # each point sits on its own pixel's value
        assert torch.equal(moved[b, :, 2], points[b, :, 2])


def test_keypoint_maps_are_the_documented_ones() -> None:
    p = torch.tensor([[[1.25, 2.5, 1.0]]]).expand(4, 1, 3)
    out = rot90_keypoints(p, torch.arange(4), 10)
    assert out[:, 0, :2].tolist() == [[1.25, 2.5], [2.5, 8.75], [8.75, 7.5], [7.5, 1.25]]


def test_k_is_drawn_from_the_batch_generator_deterministically() -> None:
    a = draw_k(400, torch.Generator().manual_seed(5), "cpu")
    b = draw_k(400, torch.Generator().manual_seed(5), "cpu")
    assert a.dtype == torch.int64 and torch.equal(a, b) and set(a.tolist()) == {0, 1, 2, 3}
    assert not torch.equal(a, draw_k(400, torch.Generator().manual_seed(6), "cpu"))


def test_non_square_fields_and_unknown_rules_are_refused() -> None:
    with pytest.raises(AugmentError, match=r"rotate-90 needs square images, got 4x5"):
        rot90_images(torch.zeros(1, 3, 4, 5), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(AugmentError, match=r"geometry rule 'warp' has no rotate-90"):
        rotate_field("warp", torch.zeros(1), torch.zeros(1), 1)
    assert set(ROT90) >= {"bilinear", "array", "nearest", "affine", "none"}
