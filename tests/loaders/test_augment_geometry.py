"""One draw, every spatial field: image, mask and keypoints stay registered after crop + flip.

The stored image's pixels encode their own coordinates (red = row, green = column), the mask
is a function of the same coordinates, and keypoints sit at known positions. After the draw
the resampled image says which stored position each output pixel shows; the mask and the
keypoints must agree with it.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.augment.crop import CropParams, center_crops, random_crops
from loaders.augment.errors import AugmentError
from loaders.augment.image.ops import CenterCrop
from loaders.augment.image.resample import crop_resample
from loaders.augment.rules import (
    APPLY,
    apply_field,
    crop_images,
    crop_keypoints,
    crop_masks,
    nearest_index,
)
from precompute.fields import KINDS, FieldSpec
from precompute.policy import Policy
from tests.loaders.devices import DEVICES

H = W = 60
POLICY = Policy(scale=(0.02, 1.0), ratio=(0.5, 2.0), attempts=10, flip=0.5, jitter=(0, 0, 0))
EXTENTS = [[0, 0, 60, 60], [10, 0, 40, 60], [0, 7, 60, 45], [20, 20, 3, 30]] * 3


def _cls(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return (i // 5 + j // 7) % 4


def _stored(b: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    i, j = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    image = torch.stack([i, j, _cls(i, j) * 60], -1).to(torch.uint8)
    return image.expand(b, H, W, 3).to(device), _cls(i, j).to(torch.uint8).expand(b, H, W).to(
        device
    )


def _crops(kind: str, device: str, size: tuple[int, int], seed: int) -> CropParams:
    extents = torch.tensor(EXTENTS, dtype=torch.int32, device=device)
    if kind == "eval":
        return center_crops(extents, size, CenterCrop(0.875))
    g = torch.Generator(device=device).manual_seed(seed)
    return random_crops(extents, g, POLICY)[0]


def _interp(line: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Linear interpolation of values at pixel centres ``k + 0.5``, extrapolated at the ends."""
    k = (pos - 0.5).floor().clamp(0, line.shape[-1] - 2).long()
    t = pos - 0.5 - k
    return line[k] * (1 - t) + line[k + 1] * t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [(24, 40), (90, 70)])
@pytest.mark.parametrize("draw", ["train", "eval"])
def test_masks_sit_on_the_image_pixels_of_their_class(device: str, size, draw: str) -> None:
    for seed in range(3):
        images, masks = _stored(len(EXTENTS), device)
        crops = _crops(draw, device, size, seed)
        img = crop_images(images, crops, size).double()  # [B, 3, h, w]: row, col, class
        got = crop_masks(masks, crops, size)
        assert got.dtype == torch.uint8 and got.shape == (len(EXTENTS), *size)
        row, col = img[:, 0], img[:, 1]
        ok = torch.zeros_like(got, dtype=torch.bool)
        for dy in (-1e-3, 1e-3):  # a position half-way between two pixels may take either
            for dx in (-1e-3, 1e-3):
                ok |= got == _cls((row + 0.5 + dy).floor().long(), (col + 0.5 + dx).floor().long())
        assert ok.all(), f"seed {seed}: {int((~ok).sum())} mask pixels off their image pixel"


def _points(b: int, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(b, 40, 2, generator=g, dtype=torch.float64) * torch.tensor([W, H])
    xy[:, :20] = xy[:, :20].floor() + 0.5  # half of them at pixel centres
    return torch.cat([xy, torch.ones(b, 40, 1, dtype=torch.float64)], -1).float().to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [(24, 40), (90, 70)])
@pytest.mark.parametrize("draw", ["train", "eval"])
def test_keypoints_land_where_the_image_shows_their_position(device: str, size, draw) -> None:
    for seed in range(3):
        images, _ = _stored(len(EXTENTS), device)
        crops = _crops(draw, device, size, seed)
        img = crop_images(images, crops, size).double().cpu()
        pts = _points(len(EXTENTS), device, seed)
        raw = crop_keypoints(pts, crops, size)
        assert raw.dtype == torch.float32 and raw.shape == pts.shape
        out, pts = raw.cpu().double(), pts.cpu().double()
        for b in range(len(EXTENTS)):
            seen = out[b, :, 2] > 0
            y = _interp(img[b, 0, :, 0], out[b, seen, 1])  # red: the stored row index
            x = _interp(img[b, 1, 0, :], out[b, seen, 0])  # green: the stored column index
            assert torch.allclose(y, pts[b, seen, 1] - 0.5, atol=2e-3)
            assert torch.allclose(x, pts[b, seen, 0] - 0.5, atol=2e-3)
            box = [int(v[b]) for v in crops[:4]]
            inner = (pts[b, :, 0] >= box[1] + 1) & (pts[b, :, 0] < box[1] + box[3] - 1)
            inner &= (pts[b, :, 1] >= box[0] + 1) & (pts[b, :, 1] < box[0] + box[2] - 1)
            outer = (pts[b, :, 0] < box[1]) | (pts[b, :, 0] >= box[1] + box[3])
            outer |= (pts[b, :, 1] < box[0]) | (pts[b, :, 1] >= box[0] + box[2])
            assert seen[inner].all() and not seen[outer].any()


def test_keypoints_agree_with_the_cpu_fast_path_too() -> None:
    images, _ = _stored(len(EXTENTS), "cpu")
    crops = _crops("train", "cpu", (50, 30), 7)
    img = crop_resample(images, crops, (50, 30)).double()  # uint8 rounding: half a step
    pts = _points(len(EXTENTS), "cpu", 7).double()
    out = crop_keypoints(pts, crops, (50, 30)).double()
    for b in range(len(EXTENTS)):
        seen = out[b, :, 2] > 0
        y = _interp(img[b, 0, :, 0], out[b, seen, 1])
        x = _interp(img[b, 1, 0, :], out[b, seen, 0])
        assert torch.allclose(y, pts[b, seen, 1] - 0.5, atol=0.75)
        assert torch.allclose(x, pts[b, seen, 0] - 0.5, atol=0.75)


def _crop(top: int, left: int, h: int, w: int, flip: float) -> CropParams:
    t = [torch.tensor([v]) for v in (top, left, h, w)]
    return CropParams(*t, torch.tensor([flip]))


def test_a_flip_mirrors_keypoints_and_swaps_flip_pairs() -> None:
    pts = torch.tensor([[[10.5, 20.5, 1], [40.5, 20.5, 2], [30.0, 70.0, 1]]])
    opts = FieldSpec("pts", "keypoints", {"flip_pairs": [[0, 1]]}).options
    plain = crop_keypoints(pts, _crop(0, 0, 60, 60, 0.0), (60, 60), opts)
    assert torch.allclose(plain, torch.tensor([[[10.5, 20.5, 1], [40.5, 20.5, 2], [30, 70, 0]]]))
    flipped = crop_keypoints(pts, _crop(0, 0, 60, 60, 1.0), (60, 60), opts)
    # point 0 (left eye at x 10.5) becomes the right eye of the mirror image: slot 1
    want = torch.tensor([[[19.5, 20.5, 2], [49.5, 20.5, 1], [30, 70, 0]]])
    assert torch.allclose(flipped, want)
    with pytest.raises(AugmentError, match=r"flip pair \[0, 5\] names point 5; there are 3"):
        crop_keypoints(pts, _crop(0, 0, 60, 60, 1.0), (60, 60), {"flip_pairs": [[0, 5]]})


def test_nearest_indices_cover_the_box_end_to_end_in_integers() -> None:
    start, length = torch.tensor([3, 0, 5]), torch.tensor([4, 1, 7])
    assert nearest_index(start, length, 7).tolist() == [
        [3, 4, 4, 5, 5, 6, 6],  # 3 + round(j / 2): ties go up
        [0] * 7,
        [5, 6, 7, 8, 9, 10, 11],
    ]
    assert nearest_index(start, length, 1).tolist() == [[5], [0], [8]]


def test_masks_flip_with_the_image_and_keep_their_dtype() -> None:
    masks = torch.arange(12, dtype=torch.int32).reshape(1, 3, 4)
    assert crop_masks(masks, _crop(0, 0, 3, 4, 1.0), (3, 4)).tolist() == [
        [[3, 2, 1, 0], [7, 6, 5, 4], [11, 10, 9, 8]]
    ]


def test_every_kind_rule_has_a_torch_implementation_and_fields_use_it() -> None:
    assert {k.augment for k in KINDS.values()} <= set(APPLY)
    crops = _crop(0, 0, 4, 4, 1.0)
    label = torch.tensor([3])
    assert apply_field(FieldSpec("label", "label"), label, crops, (2, 2)) is label
    mask = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4)
    out = apply_field(
        FieldSpec("mask", "mask", {"classes": 16, "ignore_index": 255}), mask, crops, (2, 2)
    )
    assert out.tolist() == [[[3, 0], [15, 12]]]
    gray = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4, 1)
    img = apply_field(FieldSpec("gray", "image", {"channels": 1}), gray, crops, (2, 2))
    assert img.shape == (1, 1, 2, 2) and img[0, 0].tolist() == [[3, 0], [15, 12]]


@settings(max_examples=200, deadline=None)
@given(
    top=st.integers(0, 20),
    left=st.integers(0, 20),
    h=st.integers(1, 40),
    w=st.integers(1, 40),
    oh=st.integers(1, 50),
    ow=st.integers(1, 50),
    flip=st.booleans(),
)
def test_each_mask_pixel_is_the_pixel_under_its_centre_by_the_keypoint_map(
    top: int, left: int, h: int, w: int, oh: int, ow: int, flip: bool
) -> None:
    # the mask of pixel ids says which stored pixel each output pixel shows; mapping that
    # stored pixel's centre as a keypoint must land within half a stored pixel of its centre
    ids = torch.arange(64 * 64, dtype=torch.int32).reshape(1, 64, 64)
    crops = _crop(top, left, h, w, float(flip))
    got = crop_masks(ids, crops, (oh, ow))[0]
    assert got.shape == (oh, ow)
    i, j = got // 64, got % 64
    assert ((i >= top) & (i < top + h) & (j >= left) & (j < left + w)).all()
    centres = torch.stack([j.flatten() + 0.5, i.flatten() + 0.5, torch.ones(oh * ow)], 1)
    mapped = crop_keypoints(centres[None].double(), crops, (oh, ow))[0].double()
    yy, xx = torch.meshgrid(torch.arange(oh) + 0.5, torch.arange(ow) + 0.5, indexing="ij")
    step_x = 0.5 * max(ow - 1, 1) / max(w - 1, 1) if w > 1 and ow > 1 else 0.5 * ow / w
    step_y = 0.5 * max(oh - 1, 1) / max(h - 1, 1) if h > 1 and oh > 1 else 0.5 * oh / h
    assert ((mapped[:, 0] - xx.flatten()).abs() <= step_x + 1e-4).all()
    assert ((mapped[:, 1] - yy.flatten()).abs() <= step_y + 1e-4).all()


def test_the_cpu_mask_take_equals_the_device_paths_advanced_index() -> None:
    from loaders.augment.rules import nearest_index, take_rows_cols

    gen = torch.Generator().manual_seed(3)
    masks = torch.randint(0, 250, (5, 23, 31), dtype=torch.uint8, generator=gen)
    top, left = torch.randint(0, 10, (5,), generator=gen), torch.randint(0, 12, (5,), generator=gen)
    height, width = (
        torch.randint(1, 13, (5,), generator=gen),
        torch.randint(1, 19, (5,), generator=gen),
    )
    rows, cols = nearest_index(top, height, 7), nearest_index(left, width, 9).flip(1)
    b = torch.arange(5)[:, None, None]
    want = masks[b, rows[:, :, None], cols[:, None, :]]  # what crop_masks does off the CPU
    got = take_rows_cols(masks, rows, cols)
    assert got.dtype == torch.uint8 and torch.equal(got, want)
    wide = masks.to(torch.int64) * 300
    assert torch.equal(
        take_rows_cols(wide, rows, cols), wide[b, rows[:, :, None], cols[:, None, :]]
    )
