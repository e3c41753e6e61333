"""The loader rule ``array`` (crop/flip/resize of any band count) and the per-band normalise."""

from __future__ import annotations

import pytest
import torch

from loaders.augment.arrays.bands import _taps, crop_arrays, normalize_bands
from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError
from loaders.augment.rules import crop_images
from tests.loaders.bands_reference import reference_crop, reference_normalize
from tests.loaders.devices import DEVICES

SIZES = [(9, 9), (20, 17), (3, 4), (1, 1), (1, 5), (12, 1)]  # up, down, one pixel, one side


def _crops(boxes: list[list[int]], flips: list[float], device: str = "cpu") -> CropParams:
    t = torch.tensor(boxes, device=device)
    return CropParams(t[:, 0], t[:, 1], t[:, 2], t[:, 3], torch.tensor(flips, device=device))


def _cube(dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 12, 10, 30, generator=g, dtype=torch.float64) * 60000 + 1e5
    return x.to(dtype).to(device) if dtype.is_floating_point else (x - 1e5).to(dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint16, torch.int32, torch.float32, torch.float64])
def test_a_crop_at_the_stored_size_returns_the_stored_values_exactly(
    device: str, dtype: torch.dtype
) -> None:
    x = _cube(dtype, device)
    crops = _crops([[0, 0, 12, 10], [2, 3, 6, 5], [0, 0, 12, 10]], [0.0, 0.0, 1.0], device)
    whole = crop_arrays(x, crops, (12, 10))
    want = torch.float64 if dtype in (torch.int32, torch.float64) else torch.float32
    assert whole.dtype == want and whole.shape == (3, 30, 12, 10)
    assert torch.equal(whole[0], x[0].permute(2, 0, 1).to(want))
    assert torch.equal(whole[2], x[2].permute(2, 0, 1).flip(2).to(want))  # mirrored
    part = crop_arrays(x, crops, (6, 5))
    assert torch.equal(part[1], x[1, 2:8, 3:8].permute(2, 0, 1).to(want))


def test_pixels_outside_the_box_are_never_read() -> None:
    x = torch.full((1, 12, 12, 4), 1e9)
    x[0, 3:7, 2:9] = torch.rand(4, 7, 4)
    out = crop_arrays(x, _crops([[3, 2, 4, 7]], [1.0]), (9, 13))
    assert out.max() <= 1.0


def test_three_bands_match_the_image_rule() -> None:
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (4, 20, 16, 3), generator=g, dtype=torch.uint8)
    crops = _crops([[0, 0, 20, 16], [3, 2, 9, 11], [5, 5, 2, 3], [1, 4, 17, 8]], [0, 1, 0, 1])
    got = crop_arrays(images, crops, (7, 9))
    torch.testing.assert_close(got, crop_images(images, crops, (7, 9)), atol=1e-3, rtol=0)


def test_arrays_must_be_four_dimensional() -> None:
    with pytest.raises(AugmentError, match=r"arrays must be \[B, H, W, C\], got shape \(2, 3\)"):
        crop_arrays(torch.zeros(2, 3), _crops([[0, 0, 1, 1]], [0.0]), (1, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normalize_bands_per_band_in_the_output_dtype(dtype: torch.dtype) -> None:
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.int32).reshape(2, 3, 4, 4) + 40000
    mean, std = [40010.0, 40020.0, 40030.0], [2.0, 4.0, 8.0]
    out = normalize_bands(x, mean, std, dtype)
    want = (x.double() - torch.tensor(mean)[:, None, None].double()) / torch.tensor(std)[
        :, None, None
    ].double()
    assert out.dtype == dtype
    torch.testing.assert_close(
        out.double(), want, rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=0
    )


@pytest.mark.parametrize(
    ("mean", "std", "dtype", "why"),
    [
        ([0.0, 0.0], [1.0, 1.0, 1.0], torch.float32, r"mean has 2 and std 3 values for 3 bands"),
        ([0.0] * 3, [1.0, 0.0, 1.0], torch.float32, r"std must be positive and finite"),
        ([0.0] * 3, [1.0] * 3, torch.int64, r"needs a floating output dtype, got torch.int64"),
    ],
)
def test_bad_normalise_arguments_are_refused(
    mean: list[float], std: list[float], dtype: torch.dtype, why: str
) -> None:
    with pytest.raises(AugmentError, match=why):
        normalize_bands(torch.zeros(1, 3, 2, 2), mean, std, dtype)


def _random_crops(b: int, height: int, width: int, g: torch.Generator) -> CropParams:
    h = torch.randint(1, height + 1, (b,), generator=g)
    w = torch.randint(1, width + 1, (b,), generator=g)
    top = (torch.rand(b, generator=g) * (height - h + 1)).long()
    left = (torch.rand(b, generator=g) * (width - w + 1)).long()
    return CropParams(top, left, h, w, (torch.rand(b, generator=g) < 0.5).float())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "dtype",
    [torch.uint8, torch.int16, torch.uint16, torch.bfloat16, torch.float32, torch.int32,
     torch.float64],
)  # fmt: skip
def test_crops_agree_with_the_straightforward_reference(device: str, dtype: torch.dtype) -> None:
    """Same taps and weights; the blends may round differently, by at most 4 units (eps)
    of the compute dtype at the largest stored magnitude (two blends of ~1 unit each)."""
    g = torch.Generator().manual_seed(3)
    signed = dtype not in (torch.uint8, torch.uint16)
    for size in SIZES:
        x = torch.rand(16, 12, 10, 7, generator=g, dtype=torch.float64) * 200 - 100 * signed
        x = x.to(dtype).to(device)
        crops = CropParams(*(t.to(device) for t in _random_crops(16, 12, 10, g)))
        got = crop_arrays(x, crops, size)
        want = reference_crop(x, crops, size)
        assert got.dtype == want.dtype and got.shape == want.shape == (16, 7, *size)
        tol = 4 * torch.finfo(want.dtype).eps * float(x.double().abs().max())
        torch.testing.assert_close(got, want, rtol=0, atol=tol)


def test_a_box_outside_the_stored_frame_is_refused_naming_the_sample() -> None:
    x = torch.zeros(3, 12, 10, 4)
    crops = _crops([[0, 0, 12, 10], [0, 0, 12, 10], [5, 2, 8, 3]], [0.0, 0.0, 0.0])
    why = (
        r"sample 2: crop box \(top, left, height, width\) = \[5, 2, 8, 3\] is empty or not "
        r"inside the 12x10 array"
    )
    with pytest.raises(AugmentError, match=why):
        crop_arrays(x, crops, (4, 4))
    with pytest.raises(AugmentError, match=r"sample 0: .* = \[0, 0, 0, 3\]"):
        crop_arrays(x, _crops([[0, 0, 0, 3]], [0.0]), (4, 4))


def test_taps_of_a_box_outside_the_frame_stay_in_their_own_sample() -> None:
    """A device does not check boxes (no sync): the taps are clamped into the frame, so a bad
    box reads its own sample's edge, never a neighbour's rows of the flattened batch."""
    start, length = torch.tensor([-3, 8, 0, -20]), torch.tensor([5, 6, 10, 4])
    for flip in (None, torch.tensor([1.0, 0.0, 1.0, 0.0])):
        low, high, weight = _taps(start, length, 7, flip, 10)
        assert int(low.min()) >= 0 and int(high.min()) >= 0
        assert int(low.max()) <= 9 and int(high.max()) <= 9
        assert bool(((weight >= 0) & (weight <= 1)).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_normalize_agrees_with_the_reference(dtype: torch.dtype) -> None:
    """One multiply-add ``x / std - mean / std``: off ``(x - mean) / std`` by the float32
    rounding of its terms (2 eps of ``(|x| + |mean|) / std``), plus one unit of ``dtype``."""
    g = torch.Generator().manual_seed(4)
    x = torch.rand(8, 30, 5, 5, generator=g) * 4000 + 1000
    mean = torch.rand(30, generator=g) * 4000 + 1000
    std = torch.rand(30, generator=g) * 900 + 100
    got = normalize_bands(x, mean.tolist(), std.tolist(), dtype)
    want = reference_normalize(x, mean.tolist(), std.tolist(), dtype)
    assert got.dtype == dtype and got.is_contiguous()
    terms = float(((x.abs().amax((0, 2, 3)) + mean.abs()) / std).max())
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    tol = 2 * torch.finfo(compute).eps * terms + torch.finfo(dtype).eps * float(want.abs().max())
    torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=tol)


@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last])
def test_normalize_writes_the_requested_memory_format_from_a_crop(
    fmt: torch.memory_format,
) -> None:
    x = _cube(torch.float32)
    crops = _crops([[0, 0, 12, 10], [2, 3, 6, 5], [1, 1, 9, 9]], [0.0, 1.0, 0.0])
    cropped = crop_arrays(x, crops, (7, 6))  # channels-last strides
    mean, std = [3.0] * 30, [2.0] * 30
    out = normalize_bands(cropped, mean, std, torch.float32, fmt)
    assert out.is_contiguous(memory_format=fmt)
    assert torch.equal(out, (cropped - 3.0) / 2.0)  # exact here: power-of-two std


def test_normalize_refuses_another_memory_format() -> None:
    with pytest.raises(AugmentError, match=r"writes torch.contiguous_format or .*preserve"):
        normalize_bands(torch.zeros(1, 3, 2, 2), [0.0] * 3, [1.0] * 3, torch.float32,
                        torch.preserve_format)  # fmt: skip
