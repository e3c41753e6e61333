"""``TrainAugment`` and ``EvalAugment``: composed policies implementing the loader contract.

The contract: ``augment(images, extents, generator) -> Tensor`` where ``images`` is ``[B, S, S,
3]`` uint8 (or uint16: a 16-bit store's), ``extents`` is ``[B, 4]`` int ``(top, left,
height, width)`` of the valid region, and every random number comes from ``generator`` (on
the images' device): ``TrainAugment`` keys the one crop sampler (:mod:`precompute.cropsampler`)
with ``generator.initial_seed()``, then reseeds the generator from that draw. The result is
``[B, 3, H, W]`` in the requested dtype and memory format.

A policy is data: frozen specs that round-trip through ``to_dict`` / :func:`augment_from_dict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import NoneType
from typing import Any, ClassVar

import torch

from loaders.augment.arrays.policy import BandNormalize, finish_fields
from loaders.augment.checks import check_extent_values, check_inputs, check_integer
from loaders.augment.crop import CropParams, center_crops, random_crops
from loaders.augment.errors import AugmentError
from loaders.augment.fields import augment_fields, check_field_values, moved_companions
from loaders.augment.image.color import (
    DTYPES,
    apply_color,
    color_converter,
    finish,
    normalize_,
    normalize_converter,
)
from loaders.augment.image.ops import (
    CenterCrop,
    ColorJitter,
    HorizontalFlip,
    Normalize,
    Op,
    RandomResizedCrop,
    op_from_dict,
)
from loaders.augment.image.resample import crop_resample, grid_resample
from precompute.fields import FieldSpec
from precompute.policy import Policy

__all__ = [
    "AUGMENTS",
    "PATHS",
    "EvalAugment",
    "TrainAugment",
    "augment_from_dict",
    "check_extent_values",
    "check_inputs",
]

PATHS = ("auto", "grid", "fast")


def _size(value: Any) -> tuple[int, int]:
    if isinstance(value, int):
        pair: tuple[Any, ...] = (value, value)
    else:
        try:
            pair = tuple(value)
        except TypeError:  # 24.5, None: not a size, and not a pair of them
            pair = ()
    if (
        isinstance(value, bool)
        or len(pair) != 2
        or not all(isinstance(v, int) and 1 <= v <= 8192 for v in pair)
    ):
        raise AugmentError(f"size must be an int or (height, width) in [1, 8192], got {value!r}")
    return (int(pair[0]), int(pair[1]))


@dataclass(frozen=True)
class _Augment:
    """Shared fields and plumbing of the two policies."""

    kind: ClassVar[str] = ""
    OP_FIELDS: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "normalize": (Normalize, NoneType),
        "bands": (BandNormalize, NoneType),
    }
    size: tuple[int, int] = (224, 224)
    normalize: Normalize | None = field(default_factory=Normalize)
    bands: BandNormalize | None = field(default_factory=BandNormalize)  # array fields
    dtype: str = "float32"
    channels_last: bool = False
    path: str = "auto"
    threads: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", _size(self.size))
        if self.dtype not in DTYPES:
            raise AugmentError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.path not in PATHS:
            raise AugmentError(f"path must be one of {PATHS}, got {self.path!r}")
        check_integer("threads", self.threads, 1, 64)
        rot90 = getattr(self, "rot90", False)
        if not isinstance(rot90, bool) or (rot90 and self.size[0] != self.size[1]):
            raise AugmentError(
                f"rot90 must be a bool, with a square size; got {rot90!r}, {self.size}"
            )
        for name, types in self.OP_FIELDS.items():
            value = getattr(self, name)
            if isinstance(value, Mapping):
                value = op_from_dict(value)
                object.__setattr__(self, name, value)
            if not isinstance(value, types):
                want = " or ".join(t.__name__ for t in types)
                raise AugmentError(f"{self.kind} augment: {name} must be {want}, got {value!r}")

    def _fast(self, images: torch.Tensor) -> bool:
        return self.path == "fast" or (self.path == "auto" and images.device.type == "cpu")

    def _check(
        self, images: torch.Tensor, extents: torch.Tensor, generator: torch.Generator | None
    ) -> None:
        """Check the inputs; on the fast path (host data anyway) the extent values too."""
        check_inputs(images, extents, generator)
        if self._fast(images):
            check_extent_values(extents, images.shape[1], images.shape[2])

    def _resample(
        self, images: torch.Tensor, crops: CropParams, factors: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Resample, jitter (if ``factors``) and normalise to ``[B, 3, H, W]``.

        The grid path runs each step once on the whole batch in float32; the fast path
        converts each resized sample while it is in cache, straight into the output dtype and
        memory format. Both use the same colour functions. 16-bit pixels take the grid path
        in float32, scaled by 255/65535 into the 8-bit range the colour maths expect.
        """
        if images.dtype == torch.uint16:
            images = images.to(torch.float32).mul_(255.0 / 65535.0)
        if images.dtype != torch.uint8 or not self._fast(images):
            x = grid_resample(images, crops, self.size)
            if factors is None:
                return normalize_(x, self.normalize)
            return apply_color(x, factors, self.normalize)
        convert = (
            normalize_converter(self.normalize)
            if factors is None
            else color_converter(factors, self.normalize)
        )
        return crop_resample(
            images,
            crops,
            self.size,
            convert=convert,
            threads=self.threads,
            dtype=DTYPES[self.dtype],
            channels_last=self.channels_last,
        )

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        return finish(x, self.dtype, self.channels_last)

    def _crops(
        self, extents: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[CropParams, torch.Tensor | None]:
        raise NotImplementedError

    def apply_fields(
        self,
        values: Mapping[str, torch.Tensor],
        fields: Sequence[FieldSpec],
        extents: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """Augment every field of a v2 batch with one draw (:mod:`loaders.augment.fields`).

        Args:
            values: Field name -> batch tensor, as stored (other entries are kept).
            fields: The store's fields.
            extents: ``[B, 4]`` int valid regions of the image frame.
            generator: The batch's generator (the same draw as :meth:`__call__`'s).
        """
        check_field_values(values, fields, extents)
        frame = next((values[f.name] for f in fields if f.spec.photometric), None)
        if frame is not None:
            self._check(frame.expand(-1, -1, -1, 3), extents, generator)
        crops, factors = self._crops(extents, generator)
        out = augment_fields(self, values, fields, crops, factors)
        out = finish_fields(self, out, fields, generator)  # arrays' bands, dtype; rot90
        return moved_companions(out, fields)  # e.g. the boxes a crop left: boxes.count

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Augment:
        """Parse a dict made by :meth:`to_dict` (see :func:`augment_from_dict`)."""
        policy = augment_from_dict(data)
        if not isinstance(policy, cls):
            raise AugmentError(f"{cls.__name__}.from_dict got a {data.get('kind')!r} policy")
        return policy

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (ops as their own dicts) with ``kind``."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                value.to_dict()
                if isinstance(value, Op)
                else list(value)
                if isinstance(value, tuple)
                else value
            )
        return out


@dataclass(frozen=True)
class TrainAugment(_Augment):
    """Random resized crop (in the extent) + flip + jitter + normalise + dtype/format.

    Attributes:
        size: Output ``(height, width)`` (or one int).
        crop: Crop spec; boxes are drawn inside each sample's valid extent.
        flip: Horizontal flip spec, or None.
        jitter: Colour jitter spec, or None.
        normalize: Mean/std normalisation, or None for plain ``[0, 1]`` scaling.
        dtype: ``float32``, ``bfloat16`` or ``float16``.
        channels_last: Return ``torch.channels_last`` memory format.
        path: ``grid`` (batched ``grid_sample``, any device), ``fast`` (CPU: per-crop resize)
            or ``auto`` (``fast`` for CPU tensors, else ``grid``).
        threads: Threads the CPU fast path splits a batch over (default 2;
            ``benchmarks.suite.augment`` times 1 and 2 side by side).
        bands: Per-band normalisation of array fields (spectral cubes); the default
            ``BandNormalize()`` takes the store's statistics, None only casts.
        rot90: Rotate every spatial field of a v2 sample by the same random multiple of 90
            degrees (``docs/arrays.md``; square ``size`` only).
    """

    kind: ClassVar[str] = "train"
    OP_FIELDS: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "normalize": (Normalize, NoneType),
        "bands": (BandNormalize, NoneType),
        "crop": (RandomResizedCrop,),
        "flip": (HorizontalFlip, NoneType),
        "jitter": (ColorJitter, NoneType),
    }
    crop: RandomResizedCrop = field(default_factory=RandomResizedCrop)
    flip: HorizontalFlip | None = field(default_factory=HorizontalFlip)
    jitter: ColorJitter | None = None
    rot90: bool = False

    @cached_property
    def policy(self) -> Policy:
        """The crop, flip and jitter ranges, as the crop sampler takes them.

        Built on first use and kept (the spec is frozen), not once per batch.
        """
        jitter = self.jitter
        return Policy(
            scale=self.crop.scale,
            ratio=self.crop.ratio,
            attempts=self.crop.attempts,
            flip=0.0 if self.flip is None else self.flip.p,
            jitter=(0.0, 0.0, 0.0)
            if jitter is None
            else (jitter.brightness, jitter.contrast, jitter.saturation),
        )

    def params(
        self, extents: torch.Tensor, generator: torch.Generator
    ) -> tuple[CropParams, torch.Tensor | None]:
        """Draw this batch's crops and jitter factors (see :func:`.crop.random_crops`)."""
        crops, factors = random_crops(extents, generator, self.policy)
        return crops, None if self.jitter is None else factors

    def _crops(
        self, extents: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[CropParams, torch.Tensor | None]:
        if generator is None:
            raise AugmentError("TrainAugment needs the batch's generator")
        return self.params(extents, generator)

    def __call__(
        self, images: torch.Tensor, extents: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """Augment a batch; see the module docstring for the contract."""
        self._check(images, extents, generator)
        crops, factors = self.params(extents, generator)
        return self._finish(self._resample(images, crops, factors))


@dataclass(frozen=True)
class EvalAugment(_Augment):
    """Deterministic: centre crop of the extent (short side resized) + normalise + format.

    Attributes:
        crop: Centre-crop spec (``fraction``: e.g. 224/256 for resize-256-crop-224).
    """

    kind: ClassVar[str] = "eval"
    OP_FIELDS: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "normalize": (Normalize, NoneType),
        "bands": (BandNormalize, NoneType),
        "crop": (CenterCrop,),
    }
    crop: CenterCrop = field(default_factory=CenterCrop)

    def _crops(
        self, extents: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[CropParams, torch.Tensor | None]:
        return center_crops(extents, self.size, self.crop), None

    def __call__(
        self, images: torch.Tensor, extents: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Transform a batch; ``generator`` is accepted for the contract and not used."""
        self._check(images, extents, generator)
        crops = center_crops(extents, self.size, self.crop)
        return self._finish(self._resample(images, crops))


AUGMENTS: dict[str, type[_Augment]] = {"train": TrainAugment, "eval": EvalAugment}


def augment_from_dict(data: Mapping[str, Any]) -> TrainAugment | EvalAugment:
    """Build a policy from a dict made by ``to_dict`` (unknown kinds or keys raise)."""
    if not isinstance(data, Mapping) or data.get("kind") not in AUGMENTS:
        raise AugmentError(f"an augment policy needs 'kind' in {sorted(AUGMENTS)}, got {data!r}")
    cls = AUGMENTS[data["kind"]]
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k != "kind"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise AugmentError(f"{data['kind']} augment: unknown field(s) {unknown}")
    return cls(**kwargs)  # type: ignore[return-value]
