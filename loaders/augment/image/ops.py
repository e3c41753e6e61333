"""Augmentation ops as data: frozen specs with declared parameter ranges and a name registry.

Each op is a small frozen dataclass. Its ``RANGES`` name the valid interval of every numeric
field in :data:`precompute.policy.BOUNDS` (a pair field must also be ordered low <= high), and
its defaults are the ``online`` entry of :data:`precompute.policy.POLICIES`, so a policy is
plain data with one table of ranges for every backend: it is validated once when built,
round-trips through ``to_dict`` / :func:`op_from_dict`, and can live in a config file or in
store metadata. The tensor code that executes the ops lives in
:mod:`loaders.augment.crop`, :mod:`loaders.augment.image.resample` and
:mod:`loaders.augment.image.color`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from loaders.augment.errors import AugmentError
from precompute.policy import (
    EVAL_CENTER,
    IMAGENET_MEAN,
    IMAGENET_STD,
    POLICIES,
    check_bounded,
    check_bounded_pair,
    check_rgb,
)

__all__ = [
    "OPS",
    "CenterCrop",
    "ColorJitter",
    "HorizontalFlip",
    "Normalize",
    "Op",
    "RandomResizedCrop",
    "op_from_dict",
    "register_op",
]

_ONLINE = POLICIES["online"]

OPS: dict[str, type[Op]] = {}
_T = TypeVar("_T", bound="type[Op]")
_CHECKS: dict[str, Callable[..., Any]] = {
    "scalar": check_bounded,
    "range": check_bounded_pair,
    "rgb": check_rgb,
}


def register_op(cls: _T) -> _T:
    """Class decorator: make ``cls`` buildable from a dict by its ``name``."""
    if cls.name in OPS:
        raise AugmentError(f"op name {cls.name!r} is registered twice")
    OPS[cls.name] = cls
    return cls


@dataclass(frozen=True)
class Op:
    """Base of all op specs.

    Subclasses set ``name`` (the registry key) and ``RANGES``: field name -> ``(bound,
    kind)``, where ``bound`` names the valid interval in :data:`precompute.policy.BOUNDS` and
    kind is ``scalar``, ``range`` (an ordered pair) or ``rgb`` (three values).
    """

    name: ClassVar[str] = ""
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __post_init__(self) -> None:
        for field, (bound, kind) in self.RANGES.items():
            check = _CHECKS[kind]
            value = check(f"{self.name}.{field}", getattr(self, field), bound, AugmentError)
            object.__setattr__(self, field, value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Op:
        """Parse a dict made by :meth:`to_dict`; it must name this op (or a subclass)."""
        op = op_from_dict(data)
        if not isinstance(op, cls):
            raise AugmentError(f"{cls.__name__}.from_dict got op {data.get('op')!r}")
        return op

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict with the op's ``name`` under ``op``."""
        out: dict[str, Any] = {"op": self.name}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def op_from_dict(data: Mapping[str, Any]) -> Op:
    """Build an op from a dict made by :meth:`Op.to_dict` (unknown names or keys raise)."""
    if not isinstance(data, Mapping) or "op" not in data:
        raise AugmentError(f"an op must be a mapping with an 'op' name, got {data!r}")
    cls = OPS.get(data["op"])
    if cls is None:
        raise AugmentError(f"unknown op {data['op']!r}; known: {sorted(OPS)}")
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k != "op"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise AugmentError(f"op {cls.name!r}: unknown field(s) {unknown}; known: {sorted(known)}")
    return cls(**kwargs)


@register_op
@dataclass(frozen=True)
class RandomResizedCrop(Op):
    """Random crop of a fraction of the valid extent's area, with a random aspect ratio.

    Attributes:
        scale: Range of the crop area as a fraction of the valid extent's area.
        ratio: Range of the crop aspect ratio (width / height), drawn log-uniformly.
        attempts: Candidate crops drawn per sample; the first that fits is used, else the
            fallback is the centred, ratio-clamped whole extent (as torchvision does).
    """

    name: ClassVar[str] = "random_resized_crop"
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {
        "scale": ("scale", "range"),
        "ratio": ("ratio", "range"),
        "attempts": ("attempts", "scalar"),
    }
    scale: tuple[float, float] = _ONLINE.scale
    ratio: tuple[float, float] = _ONLINE.ratio
    attempts: int = _ONLINE.attempts

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.attempts, int):
            raise AugmentError(f"{self.name}.attempts must be an integer, got {self.attempts!r}")


@register_op
@dataclass(frozen=True)
class HorizontalFlip(Op):
    """Mirror left-right with probability ``p`` (fused into the crop's resampling)."""

    name: ClassVar[str] = "horizontal_flip"
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {"p": ("flip", "scalar")}
    p: float = _ONLINE.flip


@register_op
@dataclass(frozen=True)
class CenterCrop(Op):
    """Deterministic eval crop: resize the short side to ``size / fraction``, crop the centre.

    Attributes:
        fraction: Crop side over the (resized) short side of the valid extent, e.g. 224/256.
    """

    name: ClassVar[str] = "center_crop"
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {"fraction": ("center", "scalar")}
    fraction: float = EVAL_CENTER


@register_op
@dataclass(frozen=True)
class ColorJitter(Op):
    """Per-sample brightness, contrast, saturation factors drawn from ``[1 - s, 1 + s]``.

    Applied in this fixed order; each step clamps to the valid pixel range.
    """

    name: ClassVar[str] = "color_jitter"
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {
        "brightness": ("jitter", "scalar"),
        "contrast": ("jitter", "scalar"),
        "saturation": ("jitter", "scalar"),
    }
    brightness: float = _ONLINE.jitter[0]
    contrast: float = _ONLINE.jitter[1]
    saturation: float = _ONLINE.jitter[2]


@register_op
@dataclass(frozen=True)
class Normalize(Op):
    """``(pixel / 255 - mean) / std`` per channel (RGB), fused with the output dtype cast."""

    name: ClassVar[str] = "normalize"
    RANGES: ClassVar[Mapping[str, tuple[str, str]]] = {
        "mean": ("mean", "rgb"),
        "std": ("std", "rgb"),
    }
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
