"""The one table of augmentation policies: valid bounds, named defaults, ImageNet mean/std.

Every backend that augments (the offline variants of :mod:`precompute.stages.augment`, the
torch ops of :mod:`loaders.augment` and the DALI loaders' :mod:`loaders.dali.params`) takes its
defaults and its valid ranges from here, and turns its own spec into a :class:`Policy`: what
the one crop sampler (:mod:`precompute.cropsampler`) draws from. Defaults that legitimately differ
are named entries of :data:`POLICIES`, not literals in each backend:

* ``offline``: the stored variants (:class:`precompute.spec.AugmentPolicy`): a milder crop
  (scale 0.25..1), colour jitter 0.3, no flip (flips are cheap on line).
* ``online``: the :mod:`loaders.augment` ops (``RandomResizedCrop``, ``HorizontalFlip``, and
  ``ColorJitter`` when it is switched on: ``TrainAugment``'s ``jitter`` is None by default).
* ``dali``: ``DaliAugment``'s defaults: the online crop and flip with colour jitter off, as
  ``TrainAugment()`` serves it.

This module imports neither torch, Ray nor DALI, so both packages can use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from types import MappingProxyType
from typing import Any

from precompute.checks import check_integer, check_number, check_pair, show
from precompute.errors import SpecError

__all__ = [
    "ATTEMPTS",
    "BOUNDS",
    "EVAL_CENTER",
    "GREY",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "POLICIES",
    "RATIO",
    "Policy",
    "check_bounded",
    "check_bounded_pair",
    "check_rgb",
    "show",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RATIO = (3 / 4, 4 / 3)  # random resized crop aspect range (width / height), torchvision's
ATTEMPTS = 10  # random resized crop candidates per sample before the centred fallback
GREY = (0.299, 0.587, 0.114)  # ITU-R 601 luma: the grey of contrast and saturation jitter
EVAL_CENTER = 0.875  # eval centre crop side / short side (resize 256, crop 224)
_JITTER = "brightness, contrast, saturation"

# Valid (low, high) of every policy parameter, inclusive; a pair must also be ordered.
BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "scale": (1e-4, 1.0),  # crop area / extent area
        "ratio": (1e-2, 1e2),  # crop width / height
        "attempts": (1, 64),
        "flip": (0.0, 1.0),  # probability
        "jitter": (0.0, 1.0),  # brightness, contrast, saturation strength: factor in 1 +- strength
        "center": (0.05, 1.0),  # eval crop side / short side
        "mean": (-10.0, 10.0),  # per channel, in [0, 1] pixel units
        "std": (1e-6, 1e3),
    }
)


def check_bounded(
    where: str, value: Any, bound: str, error: type[Exception] = SpecError
) -> int | float:
    """Return ``value`` if it is a number inside ``BOUNDS[bound]``, else raise ``error``.

    An integer stays an ``int`` (a count such as ``attempts``), any other number a ``float``.
    """
    number = check_number(where, value, *BOUNDS[bound], error)
    return int(value) if isinstance(value, Integral) else number


def check_bounded_pair(
    where: str, value: Any, bound: str, error: type[Exception] = SpecError
) -> tuple[float, float]:
    """Return ``value`` as an ordered ``(low, high)`` pair of floats inside ``BOUNDS[bound]``."""
    return check_pair(where, value, *BOUNDS[bound], error)


def check_rgb(
    where: str,
    value: Any,
    bound: str,
    error: type[Exception] = SpecError,
    names: str = "R, G, B",
) -> tuple[float, float, float]:
    """Return ``value`` as three floats (``names``) inside ``BOUNDS[bound]``."""
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise error(f"{where} must have 3 values ({names}), got {show(value)}")
    out = [float(check_bounded(f"{where}[{i}]", v, bound, error)) for i, v in enumerate(value)]
    return (out[0], out[1], out[2])


@dataclass(frozen=True)
class Policy:
    """What the crop sampler draws from: random resized crop, flip and colour-jitter ranges.

    Attributes:
        scale: Crop area as a fraction of the valid extent's area, drawn uniformly.
        ratio: Crop aspect ratio (width / height), drawn log-uniformly.
        attempts: Candidates per sample; the first that fits wins, else the centred whole
            extent with its ratio clamped into ``ratio`` (torchvision's rule).
        flip: Probability of a horizontal flip.
        jitter: Brightness, contrast and saturation strengths; each factor is drawn from
            ``[1 - strength, 1 + strength]``.
    """

    scale: tuple[float, float]
    ratio: tuple[float, float] = RATIO
    attempts: int = ATTEMPTS
    flip: float = 0.0
    jitter: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        scale = check_bounded_pair("policy.scale", self.scale, "scale")
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "ratio", check_bounded_pair("policy.ratio", self.ratio, "ratio"))
        lo, hi = BOUNDS["attempts"]
        attempts = check_integer("policy.attempts", self.attempts, int(lo), int(hi), SpecError)
        object.__setattr__(self, "attempts", attempts)
        object.__setattr__(self, "flip", float(check_bounded("policy.flip", self.flip, "flip")))
        object.__setattr__(
            self, "jitter", check_rgb("policy.jitter", self.jitter, "jitter", names=_JITTER)
        )


POLICIES: Mapping[str, Policy] = MappingProxyType(
    {
        "offline": Policy(scale=(0.25, 1.0), jitter=(0.3, 0.3, 0.3)),
        "online": Policy(scale=(0.08, 1.0), flip=0.5, jitter=(0.4, 0.4, 0.4)),
        "dali": Policy(scale=(0.08, 1.0), flip=0.5),
    }
)
