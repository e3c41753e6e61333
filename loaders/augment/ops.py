"""Augmentation ops as data: frozen specs with declared parameter ranges and a name registry.

Each op is a small frozen dataclass. Its ``RANGES`` declare the valid interval of every numeric
field (a pair field must also be ordered low <= high), so a policy is plain data: it is
validated once when built, round-trips through ``to_dict`` / :func:`op_from_dict`, and can live
in a config file or in store metadata. The tensor code that executes the ops lives in
:mod:`loaders.augment.crop`, :mod:`loaders.augment.resample` and :mod:`loaders.augment.color`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from loaders.augment.errors import AugmentError

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

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

OPS: dict[str, type[Op]] = {}
_T = TypeVar("_T", bound="type[Op]")

def register_op(cls: _T) -> _T:
    """Class decorator: make ``cls`` buildable from a dict by its ``name``."""
    if cls.name in OPS:
        raise AugmentError(f"op name {cls.name!r} is registered twice")
    OPS[cls.name] = cls
    return cls

def _check_value(where: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AugmentError(f"{where} must be a number, got {value!r}")
    if not lo <= value <= hi:
        raise AugmentError(f"{where} must lie in [{lo}, {hi}], got {value!r}")
    return value

def _check_field(where: str, value: Any, lo: float, hi: float, kind: str) -> Any:
    if kind == "scalar":
        return _check_value(where, value, lo, hi)
    if not isinstance(value, list | tuple):
        raise AugmentError(f"{where} must be a sequence of numbers, got {value!r}")
    out = tuple(_check_value(f"{where}[{i}]", v, lo, hi) for i, v in enumerate(value))
    if kind == "range" and (len(out) != 2 or out[0] > out[1]):
        raise AugmentError(f"{where} must be a pair (low, high) with low <= high, got {value!r}")
    if kind == "rgb" and len(out) != 3:
        raise AugmentError(f"{where} must have 3 values (R, G, B), got {value!r}")
    return out

@dataclass(frozen=True)
class Op:
    """Base of all op specs.

    Subclasses set ``name`` (the registry key) and ``RANGES``: field name -> ``(low, high,
    kind)`` with kind ``scalar``, ``range`` (an ordered pair) or ``rgb`` (three values).
    """

    name: ClassVar[str] = ""
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {}

    def __post_init__(self) -> None:
        for field, (lo, hi, kind) in self.RANGES.items():
            where = f"{self.name}.{field}"
            object.__setattr__(self, field, _check_field(where, getattr(self, field), lo, hi, kind))

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
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "scale": (1e-4, 1.0, "range"), "ratio": (1e-2, 1e2, "range"), "attempts": (1, 64, "scalar")}
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    attempts: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.attempts, int):
            raise AugmentError(f"{self.name}.attempts must be an integer, got {self.attempts!r}")

@register_op
@dataclass(frozen=True)
class HorizontalFlip(Op):
    """Mirror left-right with probability ``p`` (fused into the crop's resampling)."""

    name: ClassVar[str] = "horizontal_flip"
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {"p": (0.0, 1.0, "scalar")}
    p: float = 0.5

@register_op
@dataclass(frozen=True)
class CenterCrop(Op):
    """Deterministic eval crop: resize the short side to ``size / fraction``, crop the centre.

    Attributes:
        fraction: Crop side over the (resized) short side of the valid extent, e.g. 224/256.
    """

    name: ClassVar[str] = "center_crop"
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {"fraction": (0.05, 1.0, "scalar")}
    fraction: float = 0.875

@register_op
@dataclass(frozen=True)
class ColorJitter(Op):
    """Per-sample brightness, contrast, saturation factors drawn from ``[1 - s, 1 + s]``.

    Applied in this fixed order; each step clamps to the valid pixel range.
    """

    name: ClassVar[str] = "color_jitter"
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "brightness": (0.0, 1.0, "scalar"), "contrast": (0.0, 1.0, "scalar"),
        "saturation": (0.0, 1.0, "scalar")}
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4

@register_op
@dataclass(frozen=True)
class Normalize(Op):
    """``(pixel / 255 - mean) / std`` per channel (RGB), fused with the output dtype cast."""

    name: ClassVar[str] = "normalize"
    RANGES: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "mean": (-10.0, 10.0, "rgb"), "std": (1e-6, 1e3, "rgb")}
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
