"""Boxes through the build's placement: the exact affine map, the cut rule, packing."""

from __future__ import annotations

import numpy as np
import pytest

from precompute.fields.geometry import placement
from precompute.kinds.boxes.kind import BoxesKind
from precompute.kinds.boxes.place import PAD, count_of, place_boxes
from precompute.spec import MODES

KIND = BoxesKind()
OPTS = {"classes": 3, "max_boxes": 4, "min_visibility": 0.1, "images": None}


def _rows(*boxes: list[float]) -> np.ndarray:
    return KIND.check([list(b) for b in boxes], OPTS)


def _analytic(box: list[float], w: int, h: int, size: int, mode: str) -> np.ndarray:
    """The documented map, written out: ``(x - left) * out_w / box_w + offset_left``."""
    p = placement(w, h, size, mode)
    left, top, right, bottom = p.box
    x = [(v - left) * (p.out[0] / (right - left)) + p.offset[0]
         for v in box[0::2][:2]]  # fmt: skip
    y = [(v - top) * (p.out[1] / (bottom - top)) + p.offset[1]
         for v in box[1::2][:2]]  # fmt: skip
    return np.asarray([x[0], y[0], x[1], y[1], box[4]], dtype=np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("w", "h"), [(40, 20), (20, 40), (33, 33), (97, 31)])
def test_a_box_inside_the_kept_region_lands_exactly_where_the_map_sends_it(
    mode: str, w: int, h: int
) -> None:
    # inside the centre square of every frame here, so no mode cuts it
    cx, cy, r = w / 2, h / 2, min(w, h) / 4
    box = [cx - r + 0.3, cy - r / 2, cx + r - 0.7, cy + r, 2]
    stored = place_boxes(_rows(box), placement(w, h, 24, mode), 0.1)
    assert np.array_equal(stored[0], _analytic(box, w, h, 24, mode))
    assert count_of(stored) == 1 and (stored[1:] == PAD).all()


def test_letterbox_maps_the_whole_frame_onto_the_extent_and_keeps_everything() -> None:
    p = placement(40, 20, 32, "letterbox")  # 32 x 16, pasted at (0, 8)
    stored = place_boxes(_rows([0, 0, 40, 20, 1], [10, 5, 20, 15, 0]), p, 1.0)
    assert stored[0].tolist() == [0, 8, 32, 24, 1]
    assert stored[1].tolist() == [8, 12, 16, 20, 0]


def test_center_crop_clips_to_the_square_and_drops_by_the_kept_fraction() -> None:
    p = placement(40, 20, 20, "center-crop")  # the source square [10, 30] x [0, 20]
    half = [5, 0, 15, 10, 1]  # keeps [10, 15] x [0, 10]: exactly half its area
    gone = [0, 0, 10, 20, 2]  # entirely left of the square
    inside = [12, 2, 14, 4, 0]
    at = place_boxes(_rows(half, gone, inside), p, 0.5)
    assert at[0].tolist() == [0, 0, 5, 10, 1]  # clipped to the square's left edge, mapped
    assert at[1].tolist() == [2, 2, 4, 4, 0]  # the survivors packed first, in order
    assert count_of(at) == 2 and (at[2:] == PAD).all()
    above = place_boxes(_rows(half, gone, inside), p, np.nextafter(0.5, 1.0))
    assert above[0].tolist() == [2, 2, 4, 4, 0] and count_of(above) == 1


def test_a_box_outside_the_source_frame_is_clipped_to_it() -> None:
    p = placement(40, 20, 40, "squash")
    stored = place_boxes(_rows([-10, -5, 10, 5, 0]), p, 0.1)
    assert stored[0].tolist() == [0, 0, 10, 10, 0]  # [0, 10] x [0, 5], y scaled by 2


def test_a_sliver_that_rounds_to_no_width_is_dropped_even_at_min_visibility_0() -> None:
    p = placement(40, 20, 20, "center-crop")
    stored = place_boxes(_rows([30, 0, 31, 20, 0], [11, 1, 12, 2, 1]), p, 0.0)
    assert count_of(stored) == 1 and stored[0, 4] == 1  # [30, 31] keeps no width of [10, 30]


def test_variants_place_one_crop_per_variant() -> None:
    from precompute.fields.geometry import Placement

    p = Placement((40, 40), (10.0, 10.0, 30.0, 30.0), (20, 20), (0, 0), 20)  # a crop box
    stored = place_boxes(_rows([15, 15, 25, 25, 1], [0, 0, 5, 5, 2]), p, 0.1)
    assert stored[0].tolist() == [5, 5, 15, 15, 1] and count_of(stored) == 1
