"""Array fields (spectral cubes) under ``TrainAugment``/``EvalAugment``: bands, dtype, rotate-90.

After the batch's one crop draw has moved every field by its kind's rule (arrays by
:func:`loaders.augment.arrays.bands.crop_arrays`, ``[B, H, W, C]`` to ``[B, C, h, w]``),
:func:`finish_fields` does what is left:

* every array field (loader rule ``array``) is normalised per band by the policy's
  :class:`BandNormalize` (:func:`~loaders.augment.arrays.bands.normalize_bands`) and cast to the
  policy's ``dtype`` and memory format; ``bands=None`` casts without normalising;
* with ``rot90=True`` (``TrainAugment``), one quarter-turn count per sample is drawn from the
  batch's generator (:func:`~loaders.augment.arrays.rot90.draw_k`) and applied to every spatial
  field by :func:`~loaders.augment.arrays.rot90.rotate_field`.

``BandNormalize()`` (no ``mean``/``std``) means the store's per-band statistics: the loader
resolves it when it opens the store (:func:`bind_band_stats`, from ``report.band_stats``);
a band whose std is 0 (a constant band) is divided by 1. :func:`check_array_policy` refuses,
before the first batch, what cannot serve array fields (colour jitter: arrays have no RGB).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import torch

from loaders.augment.arrays.bands import normalize_bands
from loaders.augment.arrays.rot90 import draw_k, rotate_field
from loaders.augment.bandbuf import empty
from loaders.augment.errors import AugmentError
from loaders.augment.image.color import DTYPES
from loaders.augment.image.ops import Op, register_op
from precompute.fields import FieldSpec
from precompute.policy import show

__all__ = ["BandNormalize", "bind_band_stats", "check_array_policy", "finish_fields"]


def _floats(name: str, value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray | torch.Tensor):
        value = value.tolist()
    numbers = isinstance(value, Sequence) and not isinstance(value, str | bytes)
    if numbers:  # a number each: no strings ("1" or "123" would parse), no bools
        numbers = all(isinstance(v, Real) and not isinstance(v, bool) for v in value)
    if not numbers:
        raise AugmentError(f"band_normalize.{name} must be a list of numbers, got {show(value)}")
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        out = ()
    if not out or not all(math.isfinite(v) for v in out):
        raise AugmentError(f"band_normalize.{name} must be finite numbers, got {show(value)}")
    return out


@register_op
@dataclass(frozen=True)
class BandNormalize(Op):
    """``(x - mean[c]) / std[c]`` per band of array fields; None: the store's statistics.

    Attributes:
        mean: One value per band, or None (with ``std`` None) for the store's ``band_stats``.
        std: One positive value per band, or None.
    """

    name: ClassVar[str] = "band_normalize"
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        mean, std = _floats("mean", self.mean), _floats("std", self.std)
        if (mean is None) != (std is None) or (mean and std and len(mean) != len(std)):
            raise AugmentError(
                f"band_normalize needs mean and std of one length (or neither), got "
                f"{self.mean!r} and {self.std!r}"
            )
        if std is not None and min(std) <= 0:
            raise AugmentError(f"band_normalize.std must be positive, got {list(std)}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    @property
    def from_store(self) -> bool:
        """Whether ``mean``/``std`` are still to come from the store's statistics."""
        return self.mean is None


def _array_fields(fields: Sequence[FieldSpec]) -> list[FieldSpec]:
    return [f for f in fields if f.augment == "array"]


def _bands(field: FieldSpec) -> int:
    return int(field.storage(1).shape[-1])


def check_array_policy(fields: Sequence[FieldSpec], augment: Any) -> None:
    """Refuse colour jitter with array fields, and band statistics of the wrong length.

    Raises:
        AugmentError: Naming the field and its band count.
    """
    bands = getattr(augment, "bands", None)
    for f in _array_fields(fields):
        if getattr(augment, "jitter", None) is not None:
            raise AugmentError(
                f"colour jitter needs RGB images; field {f.name!r} is an array of "
                f"{_bands(f)} bands: use jitter=None for this store"
            )
        if isinstance(bands, BandNormalize) and bands.mean and len(bands.mean) != _bands(f):
            raise AugmentError(
                f"band_normalize has {len(bands.mean)} means; field {f.name!r} has "
                f"{_bands(f)} bands"
            )


def bind_band_stats(augment: Any, fields: Sequence[FieldSpec], report: Mapping[str, Any]) -> Any:
    """``augment`` with ``BandNormalize()`` resolved to the store's per-band mean and std.

    Raises:
        AugmentError: Statistics to take from a store that has none for its array field (or
            has several array fields: then give the values).
    """
    arrays = _array_fields(fields)
    bands = getattr(augment, "bands", None)
    if not arrays or not isinstance(bands, BandNormalize) or not bands.from_store:
        check_array_policy(fields, augment)
        return augment
    names = [f.name for f in arrays]
    stats = report.get("band_stats", {}).get(names[0]) if len(names) == 1 else None
    if stats is None:
        raise AugmentError(
            f"array field(s) {names}: no per-band statistics in the store (report.band_stats) "
            "to normalise with: give bands=BandNormalize(mean=[...], std=[...]) or bands=None"
        )
    mean = [0.0 if m is None else m for m in stats["mean"]]
    std = [s if s else 1.0 for s in stats["std"]]  # constant or empty band: unscaled
    bound = dataclasses.replace(augment, bands=BandNormalize(tuple(mean), tuple(std)))
    check_array_policy(fields, bound)
    return bound


def _finish_array(policy: Any, x: torch.Tensor) -> torch.Tensor:
    bands, dtype = policy.bands, DTYPES[policy.dtype]
    fmt = torch.channels_last if policy.channels_last else torch.contiguous_format
    if bands is None:
        if x.dtype == dtype and x.is_contiguous(memory_format=fmt):
            return x
        return empty(tuple(x.shape), dtype, x.device, fmt).copy_(x)  # a reused CPU buffer
    if bands.from_store:
        raise AugmentError(
            "BandNormalize() takes the store's statistics: give the policy to a "
            "StoreLoader, or give mean and std"
        )
    return normalize_bands(x, bands.mean, bands.std, dtype, fmt)  # one pass, dtype and format


def finish_fields(
    policy: Any,
    values: Mapping[str, torch.Tensor],
    fields: Sequence[FieldSpec],
    generator: torch.Generator | None,
) -> dict[str, torch.Tensor]:
    """Normalise and cast the cropped array fields; rotate every spatial field (``rot90``)."""
    out = dict(values)
    for f in _array_fields(fields):
        out[f.name] = _finish_array(policy, out[f.name])
    if getattr(policy, "rot90", False) and generator is not None and fields:
        batch = out[fields[0].name].shape[0]
        k = draw_k(batch, generator, out[fields[0].name].device)
        for f in fields:
            if f.spatial:
                out[f.name] = rotate_field(f.augment, out[f.name], k, policy.size[0])
    return out
