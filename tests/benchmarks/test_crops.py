"""The ``workers`` strategy's classic geometry: points, boxes and masks land where the pixels do.

Real pictures drawn with Pillow (a bright dot, a filled rectangle) go through the same crop box
and flip as their points, boxes and masks; the transformed annotations must sit on the
transformed pixels.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from benchmarks.harness.workloads.crops import (
    crop_boxes,
    crop_mask,
    crop_pixels,
    crop_points,
    random_resized_crop_box,
)

SIZE = 64


def _picture(w: int, h: int, shapes: list[tuple[float, float, float, float]]) -> np.ndarray:
    img = Image.new("RGB", (w, h), (20, 20, 20))
    draw = ImageDraw.Draw(img)
    for x0, y0, x1, y1 in shapes:
        draw.rectangle([x0, y0, x1 - 1, y1 - 1], fill=(250, 250, 250))
    return np.asarray(img)


@pytest.mark.parametrize("seed", range(12))
def test_a_point_lands_on_its_dot(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w, h = int(rng.integers(60, 120)), int(rng.integers(60, 120))
    x, y = int(rng.integers(10, w - 13)), int(rng.integers(10, h - 13))
    pixels = _picture(w, h, [(x - 1, y - 1, x + 2, y + 2)])  # a 3x3 dot centred on (x, y)
    box = (x - int(rng.integers(3, 9)), y - int(rng.integers(3, 9)), x + 9, y + 12)
    flip = bool(seed % 2)
    out = crop_pixels(pixels, box, SIZE, flip)[0]
    point = crop_points(np.array([[x + 0.5, y + 0.5, 1.0]]), box, SIZE, flip)[0]
    bright = np.argwhere(out > out.max() - 0.2)
    centre = bright.mean(0)[::-1] + 0.5  # (x, y) of the dot's pixel centres
    assert point[2] == 1.0
    assert np.abs(centre - point[:2]).max() < 1.5, (centre, point)


def test_points_outside_the_crop_are_not_visible_and_pairs_swap_under_a_flip() -> None:
    points = np.array([[5.0, 5.0, 1.0], [50.0, 5.0, 1.0], [90.0, 90.0, 1.0]])
    out = crop_points(points, (0, 0, 60, 60), 60, True, pairs=[(0, 1)])
    assert out[:, 2].tolist() == [1.0, 1.0, 0.0]
    assert out[0, :2].tolist() == [10.0, 5.0] and out[1, :2].tolist() == [55.0, 5.0]


@pytest.mark.parametrize("seed", range(8))
def test_a_box_frames_its_rectangle(seed: int) -> None:
    rng = np.random.default_rng([7, seed])
    w, h = int(rng.integers(80, 140)), int(rng.integers(80, 140))
    x0, y0 = int(rng.integers(5, w // 2)), int(rng.integers(5, h // 2))
    rect = (x0, y0, x0 + int(rng.integers(12, 30)), y0 + int(rng.integers(12, 30)))
    pixels = _picture(w, h, [rect])
    box = random_resized_crop_box(rng, w, h, scale=(0.5, 1.0))
    flip = bool(seed % 2)
    out = crop_pixels(pixels, box, SIZE, flip)[0] > 0
    rows = crop_boxes(np.array([[*rect, 1.0]]), box, SIZE, flip, 0.1, 2)
    filled = np.argwhere(out)
    if rows[0, 4] < 0:  # dropped: the crop kept less than 10% of it
        assert len(filled) < 0.1 * (rect[2] - rect[0]) * (rect[3] - rect[1]) * 4 + 40
        return
    ys, xs = filled[:, 0], filled[:, 1]
    seen = (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
    assert np.abs(np.array(seen) - rows[0, :4]).max() <= 1.5, (seen, rows[0])
    assert (rows[1] == -1).all()


def test_a_mask_moves_with_its_image() -> None:
    rng = np.random.default_rng(3)
    pixels = _picture(90, 70, [(20, 15, 50, 40)])
    mask = np.zeros((70, 90), np.uint8)
    mask[15:40, 20:50] = 2
    for _ in range(10):
        box = random_resized_crop_box(rng, 90, 70, scale=(0.4, 1.0))
        flip = bool(rng.random() < 0.5)
        bright = crop_pixels(pixels, box, SIZE, flip)[0] > 0
        ids = crop_mask(mask, box, SIZE, flip)
        assert set(np.unique(ids).tolist()) <= {0, 2}  # nearest-neighbour: never blended
        agree = (bright == (ids == 2)).mean()
        assert agree > 0.97, agree
