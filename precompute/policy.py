"""The one table of augmentation policies: valid bounds, named defaults, ImageNet mean/std.

Every backend that augments (the offline variants of :mod:`precompute.stages.augment`, the
torch ops of :mod:`loaders.augment` and the DALI loaders' :mod:`loaders.dali.params`) takes its
defaults and its valid ranges from here, and turns its own spec into a :class:`Policy`: what
the one box sampler (:mod:`precompute.boxes`) draws from. Defaults that legitimately differ
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
from types import MappingProxyType
from typing import Any

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
    "check_number",
    "check_pair",
    "check_rgb",
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


def show(value: Any) -> str:
    """A short repr of a user value for a one-line error (huge ints have no repr)."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        text = f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 60 else text[:57] + "..."


def check_number(where: str, value: Any, bound: str, error: type[Exception] = SpecError) -> Any:
    """Return ``value`` if it is a number inside ``BOUNDS[bound]``, else raise ``error``."""
    lo, hi = BOUNDS[bound]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{where} must be a number, got {show(value)}")
    if not lo <= value <= hi:
        raise error(f"{where} must lie in [{lo}, {hi}], got {show(value)}")
    return value


def _floats(where: str, value: Any, bound: str, error: type[Exception]) -> tuple[float, ...]:
    if not isinstance(value, list | tuple):
        raise error(f"{where} must be a sequence of numbers, got {show(value)}")
    return tuple(float(check_number(f"{where}[{i}]", v, bound, error)) for i, v in enumerate(value))


def check_pair(
    where: str, value: Any, bound: str, error: type[Exception] = SpecError
) -> tuple[float, float]:
    """Return ``value`` as an ordered ``(low, high)`` pair of floats inside ``BOUNDS[bound]``."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise error(f"{where} must be a pair of numbers (low, high), got {show(value)}")
    out = _floats(where, value, bound, error)
    if len(out) != 2 or out[0] > out[1]:
        raise error(f"{where} must be a pair (low, high) with low <= high, got {show(value)}")
    return (out[0], out[1])


def check_rgb(
    where: str,
    value: Any,
    bound: str,
    error: type[Exception] = SpecError,
    names: str = "R, G, B",
) -> tuple[float, float, float]:
    """Return ``value`` as three floats (``names``) inside ``BOUNDS[bound]``."""
    out = _floats(where, value, bound, error)
    if len(out) != 3:
        raise error(f"{where} must have 3 values ({names}), got {show(value)}")
    return (out[0], out[1], out[2])


@dataclass(frozen=True)
class Policy:
    """What the box sampler draws from: random resized crop, flip and colour-jitter ranges.

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
        object.__setattr__(self, "scale", check_pair("policy.scale", self.scale, "scale"))
        object.__setattr__(self, "ratio", check_pair("policy.ratio", self.ratio, "ratio"))
        check_number("policy.attempts", self.attempts, "attempts")
        if not isinstance(self.attempts, int):
            raise SpecError(f"policy.attempts must be an integer, got {self.attempts!r}")
        object.__setattr__(self, "flip", float(check_number("policy.flip", self.flip, "flip")))
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
