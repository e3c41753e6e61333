"""Boxes through a build placement: mapped exactly, clipped, dropped by area, packed first.

A sample's stored boxes are an ``(M, 5)`` float32 array of rows ``[x0, y0, x1, y1, class]``: the
first ``count`` rows are boxes, the rest are padding rows, every value :data:`PAD` (-1). The
corners are continuous coordinates in the pixel-centre convention of
:mod:`precompute.fields.geometry` (pixel ``(i, j)`` covers ``[j, j + 1) x [i, i + 1)``), so
a box that covers pixel columns ``a .. b - 1`` has ``x0 = a``, ``x1 = b``.

:func:`place_boxes` maps each corner by the placement's affine map, exactly the map of
:func:`~precompute.fields.geometry.place_keypoints` (``x' = (x - box_left) * out_w / box_w +
offset_left``, in float64, rounded once to float32), then applies the **cut rule**:

* each box is clipped to the placed source region (the stored ``extent``: the letterbox's
  valid pixels, the centre square of ``center-crop``);
* a box is dropped when the clipped box keeps less than ``min_visibility`` of its area
  (``kept < min_visibility * area``: a box that keeps exactly that fraction stays), or when
  its clipped float32 corners leave no width or height;
* the boxes left are packed first, in their order, and the rest of the rows are padding.

The kept fraction is measured in source coordinates against the clip region (the map is a
scale per axis, so it is the fraction in the stored frame too), so a box inside the region
keeps exactly 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from precompute.fields.geometry import Placement

__all__ = ["DEFAULT_MIN_VISIBILITY", "PAD", "count_of", "cut", "pack", "place_boxes"]

PAD = -1.0  # every value of a padding row (and of a hole's rows)
# The cut rule's default threshold: YOLOv5's augmentations keep a box whose area keeps more
# than 0.1 of itself (box_candidates, area_thr=0.1).
DEFAULT_MIN_VISIBILITY = 0.1


def count_of(stored: np.ndarray) -> int:
    """The boxes in one sample's stored rows: those whose class is not :data:`PAD`."""
    return int((stored[:, 4] >= 0).sum())


def pack(rows: np.ndarray, keep: np.ndarray, capacity: int) -> np.ndarray:
    """``(capacity, 5)`` float32: the ``keep`` rows of ``rows`` first, in order, then padding."""
    out = np.full((capacity, 5), PAD, dtype=np.float32)
    kept = rows[keep]
    out[: len(kept)] = kept
    return out


def cut(
    boxes: np.ndarray, region: tuple[float, float, float, float], min_visibility: float
) -> tuple[np.ndarray, np.ndarray]:
    """Clip ``(N, 4)`` float64 corners to ``region`` ``(left, top, right, bottom)``.

    Returns:
        The clipped corners and which boxes the cut rule keeps: a positive clipped width and
        height, and ``kept area >= min_visibility * area``.
    """
    left, top, right, bottom = region
    clipped = np.stack(
        [
            boxes[:, 0].clip(left, right),
            boxes[:, 1].clip(top, bottom),
            boxes[:, 2].clip(left, right),
            boxes[:, 3].clip(top, bottom),
        ],
        axis=1,
    )
    w, h = clipped[:, 2] - clipped[:, 0], clipped[:, 3] - clipped[:, 1]
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = (w > 0) & (h > 0) & (w * h >= min_visibility * area)
    return clipped, keep


def place_boxes(value: np.ndarray, p: Placement, min_visibility: Any) -> np.ndarray:
    """Map one sample's ``(M, 5)`` boxes into the stored frame by placement ``p``.

    Args:
        value: Checked rows (:meth:`~precompute.kinds.boxes.kind.BoxesKind.check`): boxes
            first, padding rows after.
        p: The sample's placement.
        min_visibility: The fraction of its area a box must keep (the cut rule).

    Returns:
        ``(M, 5)`` float32: the kept boxes mapped and clipped to the extent, packed first.
    """
    rows = value[value[:, 4] >= 0].astype(np.float64)
    region, keep = cut(rows[:, :4], p.box, float(min_visibility))
    left, top, right, bottom = p.box
    sx, sy = p.out[0] / (right - left), p.out[1] / (bottom - top)
    t, lf, h, w = p.extent
    xs = ((region[:, 0::2] - left) * sx + p.offset[0]).clip(lf, lf + w)
    ys = ((region[:, 1::2] - top) * sy + p.offset[1]).clip(t, t + h)
    placed = np.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1], rows[:, 4]], axis=1)
    placed = placed.astype(np.float32)  # one rounding; corners that meet in float32 drop
    keep &= (placed[:, 2] > placed[:, 0]) & (placed[:, 3] > placed[:, 1])
    return pack(placed, keep, value.shape[0])
