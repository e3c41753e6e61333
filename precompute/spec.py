"""Frozen, parsed build specs.

A :class:`BuildSpec` is parsed once at the boundary (CLI flags, YAML, an HTTP request), is
immutable afterwards, round-trips through :meth:`BuildSpec.to_dict` / :meth:`BuildSpec.from_dict`,
and hashes to a stable hex digest that is part of the store's identity and of the cache key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from precompute.errors import SpecError
from precompute.inputs import DEFAULT_MAX_BYTES

__all__ = ["MODES", "AugmentPolicy", "BuildSpec"]

MODES = ("letterbox", "center-crop", "squash")
ON_ERROR = ("raise", "skip")
# Pillow's own default decompression-bomb limit; a header claiming more pixels is refused.
DEFAULT_MAX_PIXELS = 89_478_485
# Fields added after stores were first built: left out of to_dict() while at their default,
# so a store built before keeps its spec hash and its cache key.
_LATE_DEFAULTS: dict[str, Any] = {"max_bytes": DEFAULT_MAX_BYTES}


def _show(value: Any) -> str:
    """A short repr of a user value for a one-line error (huge ints have no repr)."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        text = f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 60 else text[:57] + "..."


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{name} must be a number, got {_show(value)}")
    try:
        return float(value)
    except OverflowError as exc:
        raise SpecError(f"{name} must be a finite number, got {_show(value)}") from exc


def _range(name: str, value: Any, lo: float, hi: float) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise SpecError(f"{name} must be a pair of numbers, got {_show(value)}")
    a, b = (_number(name, v) for v in value)
    if not (lo <= a <= b <= hi):
        raise SpecError(f"{name} must satisfy {lo} <= low <= high <= {hi}, got {_show(value)}")
    return (a, b)


def _nonneg(name: str, value: Any, hi: float) -> float:
    v = _number(name, value)
    if not 0.0 <= v <= hi:
        raise SpecError(f"{name} must lie in [0, {hi}], got {_show(value)}")
    return v


@dataclass(frozen=True)
class AugmentPolicy:
    """Offline augmentation applied to each stored variant, as data.

    Attributes:
        scale: Random resized crop area fraction range of the source image.
        ratio: Random resized crop aspect-ratio range (width / height).
        brightness: Brightness jitter strength; the factor is drawn from [1-b, 1+b].
        contrast: Contrast jitter strength; the factor is drawn from [1-c, 1+c].
        saturation: Saturation jitter strength; the factor is drawn from [1-s, 1+s].
    """

    scale: tuple[float, float] = (0.25, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    brightness: float = 0.3
    contrast: float = 0.3
    saturation: float = 0.3

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _range("augment.scale", self.scale, 1e-4, 1.0))
        object.__setattr__(self, "ratio", _range("augment.ratio", self.ratio, 1e-2, 1e2))
        for name in ("brightness", "contrast", "saturation"):
            object.__setattr__(self, name, _nonneg(f"augment.{name}", getattr(self, name), 1.0))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        items = dataclasses.asdict(self).items()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in items}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AugmentPolicy:
        """Parse a dict produced by :meth:`to_dict` (unknown keys are an error)."""
        _check_keys("augment", data, cls)
        kwargs: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }
        return cls(**kwargs)


def _check_keys(where: str, data: Mapping[str, Any], cls: type) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise SpecError(f"unknown {where} field(s) {unknown}; known: {sorted(known)}")


@dataclass(frozen=True)
class BuildSpec:
    """Everything that decides the bytes of a store, and nothing else.

    Attributes:
        size: Stored side length S; images are stored as S x S x 3 uint8.
        mode: ``letterbox`` (fit inside, pad with ``fill``, record the valid extent),
            ``center-crop`` (resize the short side to S, crop the centre) or ``squash``.
        seed: Seed of the pre-shuffled sample order and of offline augmentation.
        shard_samples: Samples per shard file (one writer per shard).
        chunk_samples: Samples per inner chunk (the unit a loader reads).
        variants: K augmented copies per sample (1 = no offline augmentation).
        augment: Offline augmentation policy; required iff ``variants > 1``.
        on_error: ``raise`` on the first bad input, or ``skip`` it and record why.
        max_pixels: Inputs whose header claims more pixels are refused (decompression bombs).
        max_bytes: Inputs of more bytes are refused without being read (default 256 MiB).
        fill: Letterbox padding value.
    """

    size: int = 224
    mode: str = "center-crop"
    seed: int = 0
    shard_samples: int = 256
    chunk_samples: int = 32
    variants: int = 1
    augment: AugmentPolicy | None = None
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_bytes: int = DEFAULT_MAX_BYTES
    fill: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        self._check_int("size", 8, 8192)
        self._check_int("seed", 0, 2**63 - 1)
        self._check_int("shard_samples", 1, 1 << 20)
        self._check_int("chunk_samples", 1, 1 << 20)
        self._check_int("variants", 1, 64)
        self._check_int("max_pixels", 1, 1 << 40)
        self._check_int("max_bytes", 1, 1 << 40)
        self._check_int("fill", 0, 255)
        if self.mode not in MODES:
            raise SpecError(f"mode must be one of {MODES}, got {_show(self.mode)}")
        if self.on_error not in ON_ERROR:
            raise SpecError(f"on_error must be one of {ON_ERROR}, got {_show(self.on_error)}")
        if self.shard_samples % self.chunk_samples:
            raise SpecError(
                f"shard_samples ({self.shard_samples}) must be a multiple of "
                f"chunk_samples ({self.chunk_samples})"
            )
        if self.augment is not None and not isinstance(self.augment, AugmentPolicy):
            raise SpecError(f"spec field augment must be a mapping, got {_show(self.augment)}")
        if self.variants > 1 and self.augment is None:
            object.__setattr__(self, "augment", AugmentPolicy())
        if self.variants == 1 and self.augment is not None:
            raise SpecError("augment is only used with variants > 1; set variants or drop augment")
        if self.extra:
            raise SpecError(f"unknown build spec field(s) {sorted(map(str, self.extra))}")

    def _check_int(self, name: str, lo: int, hi: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise SpecError(f"{name} must be an integer in [{lo}, {hi}], got {_show(value)}")

    def to_dict(self) -> dict[str, Any]:
        """Return the canonical JSON-ready dict (every field, defaults included).

        Fields added after stores were first built (``max_bytes``) are left out while at their
        default, so the spec hash and the cache key of an existing store stay the same.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["augment"] = self.augment.to_dict() if self.augment else None
        return {k: v for k, v in out.items() if k not in _LATE_DEFAULTS or _LATE_DEFAULTS[k] != v}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildSpec:
        """Parse a dict (from JSON, YAML or a request); unknown keys raise :class:`SpecError`."""
        if not isinstance(data, Mapping):
            raise SpecError(f"a build spec must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if isinstance(kwargs.get("augment"), Mapping):
            kwargs["augment"] = AugmentPolicy.from_dict(kwargs["augment"])
        try:
            return cls(**kwargs, extra=extra)
        except TypeError as exc:  # e.g. augment given as a list
            raise SpecError(f"invalid build spec: {exc}") from exc

    def canonical_json(self) -> str:
        """Return the spec as sorted, compact JSON: the input of :meth:`digest`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """Return the sha256 hex digest of the canonical JSON."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()
