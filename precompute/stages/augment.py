"""Offline augmentation stage: an RGB image -> K augmented S x S x 3 variants.

Each variant ``v`` of store slot ``i`` draws its parameters from
``numpy.random.default_rng([build_seed, i, v])``, so a rebuild is byte-identical and no global
RNG is touched. The parameters are, in order:

1. Random resized crop at storage size (torchvision's algorithm): up to 10 tries of an area
   fraction in ``policy.scale`` and a log-uniform aspect ratio in ``policy.ratio``; the first
   box that fits is resized to S x S with :data:`~precompute.stages.resize.FILTER`; if none
   fits, the centred box with the ratio clamped into range.
2. Colour jitter, in float32 then rounded and clipped: brightness ``x * b``, contrast
   ``(x - mean(gray)) * c + mean(gray)``, saturation ``(x - gray) * s + gray`` with the
   factors drawn from ``[1 - strength, 1 + strength]`` and gray = ITU-R 601 luma.

The extent of every variant is the full image ``(0, 0, S, S)``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from precompute.spec import AugmentPolicy
from precompute.stages.base import Port, SampleContext, Stage
from precompute.stages.resize import FILTER

__all__ = ["Augment", "augment_variant", "colour_jitter", "random_resized_box"]

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def random_resized_box(
    rng: np.random.Generator, w: int, h: int, policy: AugmentPolicy
) -> tuple[int, int, int, int]:
    """Return a crop box ``(left, top, right, bottom)`` drawn by the RRC algorithm."""
    area = w * h
    log_lo, log_hi = math.log(policy.ratio[0]), math.log(policy.ratio[1])
    for _ in range(10):
        target = area * rng.uniform(*policy.scale)
        ratio = math.exp(rng.uniform(log_lo, log_hi))
        cw = round(math.sqrt(target * ratio))
        ch = round(math.sqrt(target / ratio))
        if 0 < cw <= w and 0 < ch <= h:
            left = int(rng.integers(0, w - cw + 1))
            top = int(rng.integers(0, h - ch + 1))
            return (left, top, left + cw, top + ch)
    in_ratio = w / h
    if in_ratio < policy.ratio[0]:
        cw, ch = w, max(1, round(w / policy.ratio[0]))
    elif in_ratio > policy.ratio[1]:
        cw, ch = max(1, round(h * policy.ratio[1])), h
    else:
        cw, ch = w, h
    left, top = (w - cw) // 2, (h - ch) // 2
    return (left, top, left + cw, top + ch)


def colour_jitter(
    pixels: np.ndarray, rng: np.random.Generator, policy: AugmentPolicy
) -> np.ndarray:
    """Apply brightness, contrast and saturation jitter to (S, S, 3) uint8 pixels."""
    b = rng.uniform(1 - policy.brightness, 1 + policy.brightness)
    c = rng.uniform(1 - policy.contrast, 1 + policy.contrast)
    s = rng.uniform(1 - policy.saturation, 1 + policy.saturation)
    x = pixels.astype(np.float32) * np.float32(b)
    mean = np.float32((x @ _LUMA).mean())
    x = (x - mean) * np.float32(c) + mean
    gray = (x @ _LUMA)[..., None]
    x = (x - gray) * np.float32(s) + gray
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def augment_variant(
    img: Image.Image, size: int, policy: AugmentPolicy, seed: int, slot: int, variant: int
) -> np.ndarray:
    """Return variant ``variant`` of store slot ``slot``: (S, S, 3) uint8."""
    rng = np.random.default_rng([seed, slot, variant])
    box = random_resized_box(rng, img.width, img.height, policy)
    crop = np.asarray(img.resize((size, size), FILTER, box=box), dtype=np.uint8)
    return colour_jitter(crop, rng, policy)


class Augment(Stage):
    """image -> (pixels (K, S, S, 3) uint8, extent (K, 4) int32)."""

    name: ClassVar[str] = "augment"
    consumes: ClassVar[Port] = Port("image")

    def __init__(self, size: int, variants: int, policy: AugmentPolicy) -> None:
        self.size, self.variants, self.policy = size, variants, policy

    def produces(self) -> Port:
        """Pixels of shape (K, S, S, 3), uint8."""
        return Port("pixels", (self.variants, self.size, self.size, 3), "uint8")

    def __call__(self, value: Any, ctx: SampleContext) -> tuple[np.ndarray, np.ndarray]:
        """Make the K variants of one image."""
        out = np.stack(
            [
                augment_variant(value, self.size, self.policy, ctx.seed, ctx.slot, v)
                for v in range(self.variants)
            ]
        )
        extent = np.tile(np.array([0, 0, self.size, self.size], dtype=np.int32), (self.variants, 1))
        return out, extent
