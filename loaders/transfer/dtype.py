"""A loader's ``dtype=``: the batch's signal fields handed out as floats, each as its kind says.

Every loader of the contract (``StoreLoader``, the DALI loaders, and so ``loaders.tf`` and
``loaders.jax``) takes ``dtype``: None (the default: every entry as stored, or as the policies
return it) or ``"float32"``, ``"bfloat16"``, ``"float16"``, the names an augment policy's own
``dtype`` takes. The fields whose kind gives a float scale
(:meth:`precompute.fields.Kind.float_scale`: images, audio, arrays) are then handed out in that
dtype; labels, masks, keypoints, boxes, companions (``audio.length``), ``index`` and ``is_pad``
keep theirs.

It is the last step of a batch, after ``augment`` and ``mixup``, on what they hand out: an
integer value (every field without augment) is multiplied by its kind's scale (uint8 images
to [0, 1], int16 waveforms to [-1, 1), exactly as ``AudioAugment`` makes them), a float value
(an augmented image, ``AudioAugment``'s float32, a stored log-mel) is cast. A policy that sets
its own float dtype (``TrainAugment(dtype=...)``, ``DaliAugment(dtype=...)``) must agree with
it: the policy already hands out that dtype, and two answers to one question are refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from loaders.augment.image.color import DTYPES
from precompute.fields import FieldSpec

__all__ = ["DTYPES", "check_dtype", "float_scales", "to_dtype"]


def check_dtype(dtype: object, augment: object) -> torch.dtype | None:
    """Return the torch dtype of a loader's ``dtype=`` (None: none).

    Raises:
        ValueError: ``dtype`` is not None or one of :data:`DTYPES`, or ``augment`` sets another
            float dtype of its own (the message names both).
    """
    if dtype is None:
        return None
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"dtype must be None or one of {sorted(DTYPES)}, got {dtype!r}")
    own = getattr(augment, "dtype", None)
    if isinstance(own, str) and own in DTYPES and own != dtype:
        name = type(augment).__name__
        raise ValueError(
            f"dtype={dtype!r} and the augment's dtype={own!r} disagree: {name} hands out its "
            f"own dtype; give {name}(..., dtype={dtype!r}), or leave the loader's dtype= out"
        )
    return DTYPES[dtype]


def float_scales(fields: Iterable[FieldSpec]) -> dict[str, float]:
    """The batch keys a loader's ``dtype=`` converts, with each kind's integer scale."""
    return {f.name: s for f in fields if (s := f.spec.float_scale(f.options)) is not None}


def to_dtype(
    batch: dict[str, Any], scales: Mapping[str, float], dtype: torch.dtype | None
) -> dict[str, Any]:
    """Return ``batch`` with the entries of ``scales`` in ``dtype`` (None: unchanged).

    An integer entry is multiplied by its scale (in float32, one pass), a float one cast;
    an entry already in ``dtype`` is kept as it is. On the entries' device, no host sync.
    """
    if dtype is None:
        return batch
    for key, scale in scales.items():
        x = batch.get(key)
        if isinstance(x, torch.Tensor) and x.dtype != dtype:
            batch[key] = _convert(x, scale, dtype)
    return batch


def _convert(x: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    if x.is_floating_point() or scale == 1.0:
        return x.to(dtype)
    out = torch.mul(x, scale)  # an integer tensor times a float: float32, rounded once
    return out if out.dtype == dtype else out.to(dtype)
