"""Crop parameters of the torch path, from the one crop sampler of :mod:`precompute.cropsampler`.

Both resampling paths (grid and fast) call :func:`random_crops`, so they serve the same crops
by construction, and so do the DALI loaders and the offline variants for the same key:

* the random numbers are drawn on the host by :func:`precompute.cropsampler.draw`, from a numpy
  generator keyed by ``generator.initial_seed()`` (the loader seeds the generator per batch
  from (seed, epoch, rank, batch)); the generator is then reseeded from that draw, so it moves
  on and later consumers (mixup) or a second call get fresh numbers;
* the draw (a few numbers per sample) is copied to the extents' device and the boxes are
  placed there by :func:`precompute.cropsampler.random_boxes` in float64: no ``.item()``, no host
  sync, a fixed number of kernels whatever the batch size. Extents on the CPU are placed with
  numpy instead (the same float64 arithmetic, so the same boxes, bit for bit): some forty
  tiny torch ops per batch cost the CPU fast path's calling thread more than the placement.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from loaders.augment.image.ops import CenterCrop
from precompute import cropsampler
from precompute.policy import Policy

__all__ = ["CropParams", "center_crops", "random_crops"]


class CropParams(NamedTuple):
    """Per-sample crop boxes in stored-image pixels (int64 ``[B]`` tensors) and flips.

    ``flip`` is a float ``[B]`` tensor of 0.0 / 1.0.
    """

    top: torch.Tensor
    left: torch.Tensor
    height: torch.Tensor
    width: torch.Tensor
    flip: torch.Tensor


def _params(box: torch.Tensor, flip: torch.Tensor) -> CropParams:
    top, left, h, w = box.long().unbind(1)
    return CropParams(top, left, h, w, flip)


def _to(array: np.ndarray, device: torch.device) -> torch.Tensor:
    # a pageable host copy with non_blocking=True is staged at once and never syncs the device
    return torch.from_numpy(np.ascontiguousarray(array)).to(device, non_blocking=True)


def random_crops(
    extents: torch.Tensor, generator: torch.Generator, policy: Policy
) -> tuple[CropParams, torch.Tensor]:
    """Draw random resized crops inside each sample's valid extent, flips and colour factors.

    Args:
        extents: ``[B, 4]`` int ``(top, left, height, width)`` of the valid pixels.
        generator: The batch's generator: its ``initial_seed()`` keys the draw, then it is
            reseeded from the draw.
        policy: Crop, flip and jitter ranges.

    Returns:
        Integer boxes lying inside the extents with the flip flags, and the ``[B, 3]`` float32
        brightness, contrast, saturation factors, all on the extents' device.
    """
    rng = cropsampler.generator(generator.initial_seed())
    d = cropsampler.draw(rng, extents.shape[0], policy)
    generator.manual_seed(int(rng.integers(0, cropsampler.KEY_MAX)))
    if extents.device.type == "cpu":
        box = cropsampler.random_boxes(extents.numpy().astype(np.float64), d, policy.ratio, xp=np)
        flip = torch.from_numpy(d.flip.astype(np.float32))
        return _params(torch.from_numpy(box), flip), torch.from_numpy(d.factors)
    t = cropsampler.Draw(*(_to(a, extents.device) for a in d))
    box = cropsampler.random_boxes(extents.to(torch.float64), t, policy.ratio, xp=torch)
    return _params(box, t.flip.to(torch.float32)), t.factors


def center_crops(extents: torch.Tensor, size: tuple[int, int], crop: CenterCrop) -> CropParams:
    """Deterministic eval boxes: the centred ``size``-shaped box of the resized extent.

    The extent's short side is (virtually) resized to ``min(size) / crop.fraction`` and the
    centre ``size`` box is taken (:func:`precompute.cropsampler.center_boxes`); the box is returned
    in stored-image pixels, clamped to the extent.
    """
    box = cropsampler.center_boxes(extents.to(torch.float64), size, crop.fraction, xp=torch)
    return _params(box, torch.zeros_like(box[:, 0], dtype=torch.float32))
