"""Crop parameter samplers, shared by the device (grid) path and the CPU fast path.

Both resampling paths call the same function to draw ``(top, left, height, width, flip)``
from the caller's generator, so they serve the same crop distribution by construction. All
draws are batched tensor ops on the images' device: no ``.item()``, no host sync, a fixed
number of kernels whatever the batch size, and exactly one ``torch.rand`` call per batch.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from loaders.augment.ops import CenterCrop, HorizontalFlip, RandomResizedCrop

__all__ = ["CropParams", "center_crops", "num_uniforms", "random_crops"]


class CropParams(NamedTuple):
    """Per-sample crop boxes in stored-image pixels (int64 ``[B]`` tensors) and flips.

    ``flip`` is a float ``[B]`` tensor of 0.0 / 1.0.
    """

    top: torch.Tensor
    left: torch.Tensor
    height: torch.Tensor
    width: torch.Tensor
    flip: torch.Tensor


def num_uniforms(crop: RandomResizedCrop) -> int:
    """Return the uniforms :func:`random_crops` consumes per sample."""
    return 2 * crop.attempts + 3


def _extent(extents: torch.Tensor) -> tuple[torch.Tensor, ...]:
    e = extents.to(torch.float32)
    top, left = e[:, 0], e[:, 1]
    return top, left, e[:, 2].clamp_min(1.0), e[:, 3].clamp_min(1.0)


def _fallback(eh: torch.Tensor, ew: torch.Tensor, crop: RandomResizedCrop
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole extent with its aspect ratio clamped into ``crop.ratio`` (torchvision's rule)."""
    lo, hi = crop.ratio
    ratio = ew / eh
    h = torch.where(ratio < lo, torch.round(ew / lo), eh)
    w = torch.where(ratio > hi, torch.round(eh * hi), ew)
    return h.clamp(1.0, None).minimum(eh), w.clamp(1.0, None).minimum(ew)


def random_crops(extents: torch.Tensor, u: torch.Tensor, crop: RandomResizedCrop,
                 flip: HorizontalFlip | None) -> CropParams:
    """Draw random resized crops inside each sample's valid extent.

    Args:
        extents: ``[B, 4]`` int ``(top, left, height, width)`` of the valid pixels.
        u: ``[B, num_uniforms(crop)]`` uniforms in ``[0, 1)`` from the caller's generator.
        crop: The crop spec (scale and ratio ranges, attempts).
        flip: The flip spec, or None for no flipping.

    Returns:
        Integer boxes lying inside the extents, plus the flip flags.
    """
    t = crop.attempts
    etop, eleft, eh, ew = _extent(extents)
    area = (eh * ew)[:, None]
    target = area * (crop.scale[0] + (crop.scale[1] - crop.scale[0]) * u[:, :t])
    log_lo, log_hi = math.log(crop.ratio[0]), math.log(crop.ratio[1])
    ratio = torch.exp(log_lo + (log_hi - log_lo) * u[:, t:2 * t])
    w = torch.round(torch.sqrt(target * ratio))
    h = torch.round(torch.sqrt(target / ratio))
    ok = (w >= 1) & (h >= 1) & (w <= ew[:, None]) & (h <= eh[:, None])
    first = torch.argmax(ok.to(torch.uint8), dim=1, keepdim=True)  # first fitting attempt
    found = ok.any(dim=1)
    fh, fw = _fallback(eh, ew, crop)
    h = torch.where(found, h.gather(1, first)[:, 0], fh)
    w = torch.where(found, w.gather(1, first)[:, 0], fw)
    off = u[:, 2 * t:2 * t + 2]
    dy = torch.where(found, torch.floor(off[:, 0] * (eh - h + 1)), torch.floor((eh - h) / 2))
    dx = torch.where(found, torch.floor(off[:, 1] * (ew - w + 1)), torch.floor((ew - w) / 2))
    p = 0.0 if flip is None else flip.p
    flips = (u[:, 2 * t + 2] < p).to(torch.float32)
    return CropParams((etop + dy).long(), (eleft + dx).long(), h.long(), w.long(), flips)


def center_crops(extents: torch.Tensor, size: tuple[int, int], crop: CenterCrop) -> CropParams:
    """Deterministic eval boxes: the centred ``size``-shaped box of the resized extent.

    The extent's short side is (virtually) resized to ``min(size) / crop.fraction`` and the
    centre ``size`` box is taken; the box is returned in stored-image pixels, clamped to the
    extent.
    """
    etop, eleft, eh, ew = _extent(extents)
    oh, ow = size
    pixels_per_out = crop.fraction * torch.minimum(eh, ew) / min(oh, ow)
    h = torch.round(oh * pixels_per_out).clamp(1.0, None).minimum(eh)
    w = torch.round(ow * pixels_per_out).clamp(1.0, None).minimum(ew)
    top = etop + torch.floor((eh - h) / 2)
    left = eleft + torch.floor((ew - w) / 2)
    return CropParams(top.long(), left.long(), h.long(), w.long(), torch.zeros_like(h))
