"""Offline augmentation stage: an RGB image -> K augmented S x S x 3 variants.

Variant ``v`` of store slot ``i`` is drawn by the one crop sampler (:mod:`precompute.cropsampler`,
sampler version :attr:`~precompute.spec.AugmentPolicy.SAMPLER`) from the key
:func:`variant_key` ``(build_seed, i, v)``, so a rebuild is byte-identical, no global RNG is
touched, and the loaders would draw the same box and factors from the same key. Then:

1. Random resized crop at storage size: the sampler's box (torchvision's rule: the first of
   ``attempts`` candidates that fits in the image, else the centred box with the ratio clamped)
   is resized to S x S with :data:`~precompute.stages.resize.FILTER`.
2. Colour jitter, in float32 then rounded and clipped: brightness ``x * b``, contrast
   ``(x - mean(gray)) * c + mean(gray)``, saturation ``(x - gray) * s + gray`` with the
   sampler's factors and gray = ITU-R 601 luma.

The extent of every variant is the full image ``(0, 0, S, S)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from PIL import Image

from precompute import cropsampler
from precompute.policy import GREY
from precompute.spec import AugmentPolicy
from precompute.stages.resize import FILTER

__all__ = ["augment_variant", "colour_jitter", "variant_key", "variant_params"]

_LUMA = np.array(GREY, dtype=np.float32)
_VARIANT_KEY = 0x7A2  # keeps variant keys apart from other keys derived from the build seed


def variant_key(seed: int, slot: int, variant: int) -> int:
    """Return the sampler key of one stored variant (a pure function of its arguments)."""
    return cropsampler.draw_key(seed, _VARIANT_KEY, slot, variant)


def variant_params(
    key: int, w: int, h: int, policy: AugmentPolicy
) -> tuple[tuple[int, int, int, int], npt.NDArray[np.float32]]:
    """Return the crop box ``(left, top, right, bottom)`` and the 3 colour factors of a key."""
    p = policy.policy
    d = cropsampler.draw(cropsampler.generator(key), 1, p)
    top, left, ch, cw = (
        int(v) for v in cropsampler.random_boxes(cropsampler.as_extents([[h, w]]), d, p.ratio)[0]
    )
    return (left, top, left + cw, top + ch), d.factors[0]


def colour_jitter(pixels: np.ndarray, factors: npt.NDArray[np.float32]) -> np.ndarray:
    """Apply brightness, contrast and saturation ``factors`` to (S, S, 3) uint8 pixels."""
    b, c, s = (np.float32(f) for f in factors)
    x = pixels.astype(np.float32) * b
    mean = np.float32((x @ _LUMA).mean())
    x = (x - mean) * c + mean
    gray = (x @ _LUMA)[..., None]
    x = (x - gray) * s + gray
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def augment_variant(
    img: Image.Image, size: int, policy: AugmentPolicy, seed: int, slot: int, variant: int
) -> np.ndarray:
    """Return variant ``variant`` of store slot ``slot``: (S, S, 3) uint8."""
    box, factors = variant_params(variant_key(seed, slot, variant), img.width, img.height, policy)
    crop = np.asarray(img.resize((size, size), FILTER, box=box), dtype=np.uint8)
    return colour_jitter(crop, factors)
