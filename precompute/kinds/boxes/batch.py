"""The loader rules of ``boxes`` fields, in torch: batched, on the batch's device, no host sync.

The loader registers nothing of a kind: the kind module registers these
(:mod:`precompute.kinds.boxes.kind`) and the loader calls them by rule name. A batch of boxes is
``[B, M, 5]`` float32 rows ``[x0, y0, x1, y1, class]``, boxes first, then padding rows all -1
(the stored layout, :mod:`precompute.kinds.boxes.place`); its count is the rows whose class is
not -1 (:func:`count_boxes`). Every rule ends with the build's **cut rule** against the output
frame ``[0, W] x [0, H]``: a box is clipped to it, dropped when it keeps less than the field's
``min_visibility`` of its area or no width or height, and the boxes left are packed first.

* :func:`crop_boxes` (the crop + flip of one batch): the corners are mapped as the keypoints
  rule maps points (``loaders.augment.rules.crop_keypoints``, the image kernel's map, pixel
  centres onto pixel centres: ``x' = W / 2 + (x - left - w / 2) * s``, ``s = (W - 1) / (w -
  1)``, ``W / w`` for a one-pixel side; then ``x' -> W - x'`` under a flip, so ``x0`` and
  ``x1`` swap), in float64, rounded to float32. The output pixels whose centres lie in a
  mapped box are those the resampled image shows inside the stored box.
* :func:`rot90_boxes`: the corners turned as keypoints are (``k = 1``: ``(y, n - x)``;
  ``k = 2``: ``(n - x, n - y)``; ``k = 3``: ``(n - y, x)``), each box's corners re-sorted.
* :func:`mix_boxes` (mixup and CutMix, one batch's draw; sample ``i``'s partner is sample
  ``B - 1 - i``). The output has **capacity 2M** (``[B, 2M, 5]`` whatever the draw, so a
  batch's shape never depends on it): the sample's own boxes, then its partner's:

  - **mixup**: the union, each box at full weight (as mmdetection's and YOLOX's MixUp
    concatenate the two images' boxes): a box is kept while its image shows in the blend,
    own boxes for ``lam > 0``, the partner's for ``lam < 1`` (so a batch left unmixed,
    ``lam = 1``, keeps its own boxes only);
  - **CutMix** (the partner's pixels pasted into the region ``R``): each own box becomes the
    bounding box of its part outside ``R`` (it shrinks only where ``R`` spans the box's whole
    height or width), kept when that part holds ``min_visibility`` of its area; the
    partner's boxes are clipped to ``R`` by the cut rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from precompute.kinds.boxes.place import DEFAULT_MIN_VISIBILITY, PAD

__all__ = ["count_boxes", "crop_boxes", "mix_boxes", "pack", "rot90_boxes"]

Size = tuple[int, int]
Region = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def count_boxes(boxes: torch.Tensor) -> torch.Tensor:
    """``[...]`` int32: the boxes of each sample of ``[..., M, 5]`` (class not -1)."""
    return (boxes[..., 4] >= 0).sum(-1).to(torch.int32)


def _min_visibility(options: Mapping[str, Any] | None) -> float:
    return float((options or {}).get("min_visibility", DEFAULT_MIN_VISIBILITY))


def pack(boxes: torch.Tensor, keep: torch.Tensor, capacity: int) -> torch.Tensor:
    """``[B, capacity, 5]`` (``capacity <= N``): each sample's ``keep`` rows first, in order."""
    order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices[:, :capacity]
    rows = boxes.gather(1, order[..., None].expand(-1, -1, 5))
    return torch.where(keep.gather(1, order)[..., None], rows, torch.full_like(rows, PAD))


def _cut(
    boxes: torch.Tensor, region: Region, min_visibility: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clip ``[B, N, 5]`` boxes to ``region`` ``(left, top, right, bottom)`` (broadcastable).

    Returns:
        The clipped boxes and which the cut rule keeps (rows that are boxes only).
    """
    b = boxes.to(torch.float64)
    left, top, right, bottom = region
    x0, x1 = b[..., 0].clamp(left, right), b[..., 2].clamp(left, right)
    y0, y1 = b[..., 1].clamp(top, bottom), b[..., 3].clamp(top, bottom)
    area = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    clipped = torch.stack([x0, y0, x1, y1, b[..., 4]], -1).to(boxes.dtype)
    keep = (boxes[..., 4] >= 0) & ((x1 - x0) * (y1 - y0) >= min_visibility * area)
    keep &= (clipped[..., 2] > clipped[..., 0]) & (clipped[..., 3] > clipped[..., 1])
    return clipped, keep


def _frame(size: Size, like: torch.Tensor) -> Region:
    zero = torch.zeros((), dtype=torch.float64, device=like.device)
    return zero, zero, zero + size[1], zero + size[0]


def _axis(start: torch.Tensor, length: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, 1]`` scale and offset of ``x' = x * scale + offset`` (the keypoints rule's map)."""
    start, length = start.to(torch.float64), length.to(torch.float64)
    centred = (n - 1) / (length - 1).clamp(min=1.0)
    scale = torch.where((length > 1) & (n > 1), centred, n / length)
    return scale[:, None, None], (n / 2 - (start + length / 2) * scale)[:, None, None]


def _sorted(xs: torch.Tensor, ys: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """``[B, M, 5]`` from ``[B, M, 2]`` corner coordinates, each pair sorted."""
    return torch.stack([xs.amin(-1), ys.amin(-1), xs.amax(-1), ys.amax(-1), classes], -1)


def crop_boxes(
    boxes: torch.Tensor, crops: Any, size: Size, options: Mapping[str, Any] | None = None
) -> torch.Tensor:
    """Crop, flip and resize ``[B, M, 5]`` boxes into the ``size`` output frame; cut, packed.

    Args:
        boxes: Stored rows, boxes first, in stored-image pixels.
        crops: One box and flip per sample (``top``, ``left``, ``height``, ``width``,
            ``flip``: ``[B]`` tensors on ``boxes``' device; ``loaders.augment.crop``).
        size: Output ``(height, width)``.
        options: The field's options (``min_visibility``).

    Returns:
        ``[B, M, 5]`` float32 in output pixels.
    """
    sx, bx = _axis(crops.left, crops.width, size[1])
    sy, by = _axis(crops.top, crops.height, size[0])
    b = boxes.to(torch.float64)
    xs, ys = b[..., 0::2][..., :2] * sx + bx, b[..., 1::2][..., :2] * sy + by
    xs = torch.where(crops.flip[:, None, None] > 0, size[1] - xs, xs)
    moved = _sorted(xs.to(torch.float32), ys.to(torch.float32), boxes[..., 4].to(torch.float32))
    clipped, keep = _cut(moved, _frame(size, boxes), _min_visibility(options))
    return pack(clipped, keep, boxes.shape[1])


def rot90_boxes(boxes: torch.Tensor, k: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Turn ``[B, M, 5]`` boxes of a ``size x size`` frame by ``k[b]`` quarter turns."""
    if size is None:
        raise ValueError("rotating boxes needs the frame side (size)")
    x, y = boxes[..., 0::2][..., :2], boxes[..., 1::2][..., :2]
    k = k.long()[:, None, None]
    nx, ny = size - x, size - y
    ox = torch.where(k == 0, x, torch.where(k == 1, y, torch.where(k == 2, nx, ny)))
    oy = torch.where(k == 0, y, torch.where(k == 1, nx, torch.where(k == 2, ny, x)))
    turned = _sorted(ox, oy, boxes[..., 4])
    return torch.where(boxes[..., 4:] >= 0, turned, boxes)


def _remainder(
    boxes: torch.Tensor, region: Region, min_visibility: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Own boxes under a CutMix paste of ``region``: the bounding box of the part left, kept?

    Whether the paste spans a box is asked of the box's pixels, those whose centres it holds
    (its edges rounded half up): the pasted region has whole-pixel edges, and a box edge at
    4.63 beside a paste from column 5 has no pixel left of it.
    """
    x0, y0, x1, y1 = boxes.to(torch.float64)[..., :4].unbind(-1)
    px0, py0, px1, py1 = (torch.floor(v + 0.5) for v in (x0, y0, x1, y1))
    left, top, right, bottom = region
    inside = (x1.clamp(max=right) - x0.clamp(min=left)).clamp(min=0)
    inside = inside * (y1.clamp(max=bottom) - y0.clamp(min=top)).clamp(min=0)
    area = (x1 - x0) * (y1 - y0)
    spans_h, spans_w = (top <= py0) & (bottom >= py1), (left <= px0) & (right >= px1)
    nx0 = torch.where(spans_h & (left <= px0) & (right > x0), right, x0)
    nx1 = torch.where(spans_h & (right >= px1) & (left < x1), left, x1)
    ny0 = torch.where(spans_w & (top <= py0) & (bottom > y0), bottom, y0)
    ny1 = torch.where(spans_w & (bottom >= py1) & (top < y1), top, y1)
    out = torch.stack([nx0, ny0, nx1, ny1], -1).to(boxes.dtype)
    out = torch.cat([out, boxes[..., 4:]], -1)
    left_over = area - inside
    keep = (boxes[..., 4] >= 0) & (left_over > 0) & (left_over >= min_visibility * area)
    keep &= (out[..., 2] > out[..., 0]) & (out[..., 3] > out[..., 1])
    return out, keep


def mix_boxes(boxes: torch.Tensor, field: Any, draw: Any) -> torch.Tensor:
    """Mix ``[B, M, 5]`` boxes by one batch's draw: ``[B, 2M, 5]``, packed.

    Args:
        boxes: The batch's boxes in the (augmented) image frame.
        field: The boxes field (its ``options``' ``min_visibility``).
        draw: The batch's mixing draw (``precompute.kinds.hooks.MixDraw``): ``cutmix``,
            ``lam``, and ``box`` ``(top, bottom, left, right)`` of the pasted pixel rows and
            columns, the region ``[left, right] x [top, bottom]`` in pixel-edge coordinates.
    """
    mv = _min_visibility(field.options)
    top, bottom, left, right = draw.box.to(torch.float64).unbind(0)
    region = (left, top, right, bottom)
    partner = boxes.flip(0)
    # an odd batch's middle sample is its own partner: its image is unchanged, and so are its
    # boxes (not each one twice, nor cut in two by the paste)
    n = boxes.shape[0]
    alone = torch.arange(n, device=boxes.device) == n - 1 - torch.arange(n, device=boxes.device)
    alone = alone[:, None]
    own_cut, own_cut_ok = _remainder(boxes, region, mv)
    their_cut, their_cut_ok = _cut(partner, region, mv)
    own = torch.where(draw.cutmix & ~alone[..., None], own_cut, boxes)
    mixed_ok = torch.where(draw.cutmix, own_cut_ok, (boxes[..., 4] >= 0) & (draw.lam > 0))
    own_ok = torch.where(alone, boxes[..., 4] >= 0, mixed_ok)
    theirs = torch.where(draw.cutmix, their_cut, partner)
    theirs_ok = torch.where(draw.cutmix, their_cut_ok, (partner[..., 4] >= 0) & (draw.lam < 1))
    theirs_ok &= ~alone
    rows, keep = torch.cat([own, theirs], 1), torch.cat([own_ok, theirs_ok], 1)
    return pack(rows, keep, 2 * boxes.shape[1])
