"""Augmentation and mixing of a v2 store's named fields: one draw per sample, every field.

A policy's ``apply_fields`` draws the batch's crops (and jitter factors) once, exactly as its
image path does from the same generator, then each field is moved by what its kind declares
(:class:`precompute.fields.Kind`), never by its name:

* a ``photometric`` kind (images) takes the policy's whole image path: crop + flip + resize
  (bilinear), jitter, normalise, output dtype and memory format; a 1-channel image is
  resampled as grey RGB and its first channel kept (normalised with the first mean and std);
  16-bit pixels (``--bit-depth 16``) take the grid path in float32, scaled by 255/65535, so
  jitter and normalisation mean the same for either depth and no 16-bit step is lost;
* every other field takes its kind's geometry rule from
  :data:`loaders.augment.rules.APPLY` (masks nearest, values never blended and dtype kept;
  keypoints the exact map with ``flip_pairs``, float32; ``none``: as stored).

Mixing (:func:`loaders.augment.mix.mix_fields`) follows the kinds' ``mixup`` and ``cutmix``
rules: images blend
or take the pasted box, masks take the same pasted box (CutMix only: a policy that may blend
a field whose kind refuses it is an :class:`AugmentError` naming the field), label fields
become soft targets mixed by the same lambda (the pasted area under CutMix).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from loaders.augment.audio.fields import check_audio_policies
from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError
from loaders.augment.rules import apply_field, missing_rule
from precompute.fields import FieldSpec
from precompute.kinds.hooks import loader_rule

__all__ = [
    "augment_fields",
    "check_field_policies",
    "check_field_values",
    "moved_companions",
]


def check_field_policies(fields: Sequence[FieldSpec], augment: Any, mixup: Any) -> None:
    """Refuse, before the first batch, policies that cannot serve a v2 store's ``fields``.

    A v2 store's policies are called as ``augment.apply_fields(values, fields, extents,
    generator)`` and ``mixup.apply_fields(values, fields, generator)`` (a plain image
    callable could not move the other fields); a :class:`Mixup` that could blend or paste a
    field whose kind refuses it is refused too (``Mixup.check_fields``). Nothing to check for
    a v1 store (``fields`` empty).

    Raises:
        TypeError: A policy that is a class (``augment=TrainAugment``) or not callable.
        ValueError: A policy without ``apply_fields``, naming the store's fields.
        AugmentError: A field the geometry moves whose kind's loader rule no module
            registered; a mixing policy a field's kind refuses; an image policy or a separate
            ``mixup`` on an audio store, ``AudioAugment`` on a store without audio
            (:func:`~loaders.augment.audio.fields.check_audio_policies`).

    Warns:
        UserWarning: A policy that flips a field whose kind says a flip changes its meaning
            (keypoints without flip pairs: ``Kind.flip_warning``), once per loader.
    """
    for what, policy in (("augment", augment), ("mixup", mixup)):
        if isinstance(policy, type):  # augment=TrainAugment: called with the batch, it fails
            raise TypeError(
                f"{what}={policy.__name__} is the class: give an instance, e.g. "
                f"{what}={policy.__name__}(...)"
            )
        usable = callable(policy) or callable(getattr(policy, "apply_fields", None))
        if policy is not None and not usable:
            raise TypeError(
                f"{what} must be a policy such as TrainAugment(...), EvalAugment(...) or "
                f"Mixup(...), got {policy!r}"
            )
    check_audio_policies(fields, augment, mixup)  # AudioAugment on a v1 store too
    if not fields:
        return
    names = [f.name for f in fields]
    for what, policy in (("augment", augment), ("mixup", mixup)):
        if policy is not None and not callable(getattr(policy, "apply_fields", None)):
            raise ValueError(
                f"{what}={policy!r} cannot serve a store of fields {names}: it needs "
                f"{what}.apply_fields(...) (TrainAugment, EvalAugment, Mixup have it)"
            )
    check = getattr(mixup, "check_fields", None)  # Mixup: fields its kinds refuse to mix
    if callable(check):
        check(fields)
    if augment is not None:  # each field the geometry moves has its rule (a plugin's may not)
        for f in fields:
            if not f.spec.photometric and loader_rule(f.augment) is None:
                raise missing_rule(f)
        _warn_flips(fields, augment)


def _warn_flips(fields: Sequence[FieldSpec], augment: Any) -> None:
    """Warn, once a loader is made, of fields whose meaning a flip changes (``Kind.flip_warning``).

    A policy flips when its crop sampler's flip probability is above 0 (``augment.policy``).
    """
    if float(getattr(getattr(augment, "policy", None), "flip", 0.0) or 0.0) <= 0:
        return
    for f in fields:
        said = f.spec.flip_warning(f.name, f.options)
        if said:
            warnings.warn(said, UserWarning, stacklevel=5)  # the StoreLoader(...) line


def check_field_values(
    values: Mapping[str, torch.Tensor], fields: Sequence[FieldSpec], extents: torch.Tensor
) -> None:
    """Check that every field is given, with the batch's length, and images NHWC uint8/16."""
    for f in fields:
        if f.name not in values:
            raise AugmentError(f"field {f.name!r} ({f.kind}) is missing from the batch")
        x = values[f.name]
        if x.shape[0] != extents.shape[0]:
            raise AugmentError(
                f"field {f.name!r} has {x.shape[0]} samples, extents {extents.shape[0]}"
            )
        if f.spec.photometric and (x.dtype not in (torch.uint8, torch.uint16) or x.dim() != 4):
            raise AugmentError(
                f"field {f.name!r} ({f.kind}) must be [B, H, W, C] uint8 or uint16, got "
                f"{tuple(x.shape)} {x.dtype}"
            )


def _photometric(policy: Any, x: torch.Tensor, crops: CropParams, factors: Any) -> torch.Tensor:
    """The policy's image path on ``x`` ([B, H, W, 1 or 3] uint8 or uint16)."""
    channels = x.shape[3]
    if channels not in (1, 3):
        raise AugmentError(f"images must have 1 or 3 channels, got shape {tuple(x.shape)}")
    out: torch.Tensor = policy._finish(policy._resample(x.expand(-1, -1, -1, 3), crops, factors))
    return out if channels == 3 else out[:, :1]


def augment_fields(
    policy: Any,
    values: Mapping[str, torch.Tensor],
    fields: Sequence[FieldSpec],
    crops: CropParams,
    factors: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """Apply one batch's draw (``crops``, jitter ``factors``) to every field of ``values``.

    Entries of ``values`` that are not fields (``index``, ``is_pad``) are returned as given.
    """
    out = dict(values)
    for f in fields:
        if f.spec.photometric:
            out[f.name] = _photometric(policy, values[f.name], crops, factors)
        else:
            out[f.name] = apply_field(f, values[f.name], crops, policy.size)
    return out


def moved_companions(
    values: Mapping[str, torch.Tensor], fields: Sequence[FieldSpec]
) -> dict[str, torch.Tensor]:
    """``values`` with the companions each kind computes from its moved value.

    ``Kind.moved_companions`` (e.g. a boxes field's ``count`` after a crop dropped boxes),
    cast to the companion's storage dtype, on the value's device. Called at the end of a
    policy's geometry and of each mixing.
    """
    out = dict(values)
    for f in fields:
        moved = f.spec.moved_companions(out[f.name], f.options)
        if not moved:
            continue
        storage = f.spec.companions(f.options, 1)  # dtypes only: they do not depend on S
        for what, v in moved.items():
            out[f"{f.name}.{what}"] = v.to(getattr(torch, storage[what].dtype))
    return out
