"""Boxes under the loader's crop, flip and rotate-90: the pixels say where each box went.

Each sample's image is black with one white rectangle per box, so the pixels themselves
encode the boxes: after the batch's crop (and flip, and quarter turn) the white pixels of the
returned image must lie exactly in the returned box, to within the half pixel a resampled
edge can move.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from loaders.augment.arrays.rot90 import rot90_images
from loaders.augment.crop import CropParams
from loaders.augment.rules import crop_images, crop_keypoints
from precompute.kinds.boxes.batch import count_boxes, crop_boxes, rot90_boxes
from tests.loaders.devices import DEVICES

B, S, OUT = 48, 64, (32, 40)
NONE = {"min_visibility": 0.0}


def _scene(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, S, S, 3]`` uint8 images, one white rectangle each, and ``[B, 2, 5]`` boxes."""
    rng = np.random.default_rng(seed)
    images = np.zeros((B, S, S, 3), dtype=np.uint8)
    boxes = np.full((B, 2, 5), -1.0, dtype=np.float32)
    for b in range(B):
        x0, y0 = rng.integers(0, S - 24, 2)
        w, h = rng.integers(10, 24, 2)
        images[b, y0 : y0 + h, x0 : x0 + w] = 255
        boxes[b, 0] = [x0, y0, x0 + w, y0 + h, b % 3]
    return torch.from_numpy(images), torch.from_numpy(boxes)


def _crops(seed: int, device: str) -> CropParams:
    g = torch.Generator().manual_seed(seed)
    top, left = torch.randint(0, 24, (B,), generator=g), torch.randint(0, 24, (B,), generator=g)
    h, w = torch.randint(24, 41, (B,), generator=g), torch.randint(24, 41, (B,), generator=g)
    flip = (torch.rand(B, generator=g) < 0.5).float()
    return CropParams(*(t.to(device) for t in (top, left, h, w, flip)))


def _white(image: torch.Tensor) -> tuple[float, float, float, float] | None:
    """``(x0, y0, x1, y1)`` pixel edges of the white pixels of ``[H, W]``, None if none."""
    on = image > 127.5
    rows, cols = torch.nonzero(on.any(1)).flatten(), torch.nonzero(on.any(0)).flatten()
    if not len(rows):
        return None
    return float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1)


def _agree(images: torch.Tensor, boxes: torch.Tensor) -> float:
    """The largest distance between a box's edge and its rectangle's edge in the pixels."""
    worst, seen = 0.0, 0
    for b in range(images.shape[0]):
        white, box = _white(images[b].cpu()), boxes[b, 0].cpu()
        if box[4] < 0:
            assert white is None, f"sample {b}: box dropped but the rectangle shows"
            continue
        if white is None:  # a sliver narrower than a pixel centre's reach: nothing to see
            assert min(box[2] - box[0], box[3] - box[1]) < 1, f"sample {b}: {box}"
            continue
        worst = max(worst, float((torch.tensor(white) - box[:4]).abs().max()))
        seen += 1
    assert seen > B // 2
    return worst


@pytest.mark.parametrize("device", DEVICES)
def test_a_cropped_flipped_box_frames_the_rectangle_in_the_returned_pixels(device: str) -> None:
    images, boxes = _scene(0)
    crops = _crops(1, device)
    assert crops.flip.sum() > 0 and (crops.flip == 0).sum() > 0  # both cases in the batch
    pixels = crop_images(images.to(device), crops, OUT)[:, 0]
    moved = crop_boxes(boxes.to(device), crops, OUT, NONE)
    assert moved.device.type == device and moved.dtype == torch.float32
    assert _agree(pixels, moved) <= 0.5


@pytest.mark.parametrize("device", DEVICES)
def test_a_turned_box_frames_the_turned_rectangle(device: str) -> None:
    images, boxes = _scene(2)
    crops = _crops(3, device)
    side = (OUT[0], OUT[0])
    pixels = crop_images(images.to(device), crops, side)
    moved = crop_boxes(boxes.to(device), crops, side, NONE)
    k = torch.arange(B, device=device) % 4
    turned = rot90_boxes(moved, k, side[0])
    assert _agree(rot90_images(pixels, k)[:, 0], turned) <= 0.5
    assert (turned[moved[..., 4] < 0] == -1).all()  # padding rows stay padding


def test_the_corners_move_exactly_as_the_keypoints_rule_moves_points() -> None:
    _, boxes = _scene(4)
    crops = _crops(5, "cpu")
    moved = crop_boxes(boxes, crops, OUT, NONE)
    corners = torch.cat([boxes[:, :1, :4].reshape(B, 2, 2), torch.ones(B, 2, 1)], -1)
    points = crop_keypoints(corners, crops, OUT)[..., :2]  # [B, corner, (x, y)]
    low, high = points.amin(1), points.amax(1)
    want = torch.cat([low, high], -1)
    want[:, 0::2], want[:, 1::2] = want[:, 0::2].clamp(0, OUT[1]), want[:, 1::2].clamp(0, OUT[0])
    kept = moved[:, 0, 4] >= 0
    assert kept.sum() > B // 2 and torch.equal(moved[kept, 0, :4], want[kept])


def _unit_crop(left: int, flip: float = 0.0) -> CropParams:
    """One sample: a 20 x 20 crop at ``(0, left)`` into 20 x 20 (scale 1: edges stay exact)."""
    t = torch.tensor
    return CropParams(t([0]), t([left]), t([20]), t([20]), t([flip]))


def test_the_cut_rule_keeps_a_box_at_exactly_min_visibility_and_drops_it_below() -> None:
    boxes = torch.tensor([[[0.0, 0, 10, 10, 1], [12, 2, 14, 4, 2], [-1, -1, -1, -1, -1]]])
    crop = _unit_crop(5)  # the box [0, 10] keeps [5, 10]: half its area
    at = crop_boxes(boxes, crop, (20, 20), {"min_visibility": 0.5})
    assert at[0].tolist() == [[0, 0, 5, 10, 1], [7, 2, 9, 4, 2], [-1] * 5]
    above = crop_boxes(boxes, crop, (20, 20), {"min_visibility": float(np.nextafter(0.5, 1))})
    assert above[0].tolist() == [[7, 2, 9, 4, 2], [-1] * 5, [-1] * 5]  # survivors packed
    assert count_boxes(at).tolist() == [2] and count_boxes(above).tolist() == [1]


def test_a_flip_mirrors_x_and_swaps_the_left_and_right_edges() -> None:
    boxes = torch.tensor([[[2.0, 3, 6, 9, 0]]])
    out = crop_boxes(boxes, _unit_crop(0, flip=1.0), (20, 20), NONE)
    assert out[0, 0].tolist() == [14, 3, 18, 9, 0]  # x0' = 20 - x1, x1' = 20 - x0
