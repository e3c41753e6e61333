"""``AudioAugment`` on a v2 store's fields: the audio field, its ``.length``, the label.

A store built from an audio source has the fields ``audio`` (kind ``audio``, companions
``audio.length`` and ``audio.start``) and ``label``. :func:`apply_audio_fields` maps that batch
onto :class:`~loaders.augment.audio.policy.AudioAugment`'s ``{"audio", "length", "label"}`` and
back, so the loader's ``augment.apply_fields(values, fields, extents, generator)`` call works
for audio as for images. :func:`check_audio_policies` refuses, before the first batch, a
policy that cannot serve the store: an image policy on audio (it would pass the clips through
untouched), ``AudioAugment`` on a store without an audio field, a separate ``mixup`` (audio
mixing is part of ``AudioAugment``), or mixing to another class count than the label's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from loaders.augment.errors import AugmentError
from precompute.fields import FieldSpec
from precompute.kinds.audio import AudioKind

# AudioAugment's call: a batch dict and the generator -> the augmented batch dict
AudioPolicy = Callable[[Mapping[str, torch.Tensor], torch.Generator], dict[str, torch.Tensor]]

__all__ = ["apply_audio_fields", "audio_field", "check_audio_policies"]


def audio_field(fields: Sequence[FieldSpec]) -> FieldSpec | None:
    """The store's one field of kind ``audio`` (None without one)."""
    found = [f for f in fields if isinstance(f.spec, AudioKind)]
    if len(found) > 1:
        raise AugmentError(f"AudioAugment serves one audio field; the store has {found}")
    return found[0] if found else None


def _label(fields: Sequence[FieldSpec]) -> FieldSpec:
    found = [f for f in fields if f.spec.class_index]
    if len(found) != 1:
        names = [f.name for f in fields]
        raise AugmentError(f"AudioAugment needs one label field; the store has {names}")
    return found[0]


def _is_audio_policy(policy: Any) -> bool:
    """An :class:`~loaders.augment.audio.policy.AudioAugment` (it says so: ``serves_audio``)."""
    return bool(getattr(policy, "serves_audio", False))


def check_audio_policies(fields: Sequence[FieldSpec], augment: Any, mixup: Any) -> None:
    """Refuse policies that cannot serve a store's audio field (or an audio policy without one).

    Raises:
        AugmentError: Naming the field and the policy to use.
    """
    audio = audio_field(fields)
    if audio is None:
        if _is_audio_policy(augment):
            names = [f.name for f in fields]
            raise AugmentError(f"AudioAugment needs a field of kind audio; the store has {names}")
        return
    if augment is not None and not _is_audio_policy(augment):
        raise AugmentError(
            f"augment={type(augment).__name__} cannot serve the audio field {audio.name!r} "
            "(kind audio): use loaders.augment.AudioAugment(...) or augment=None"
        )
    if mixup is not None:
        raise AugmentError(
            f"mixup={type(mixup).__name__} cannot mix the audio field {audio.name!r}: mix "
            "with AudioAugment(mixup_alpha=..., cutmix_alpha=..., num_classes=...)"
        )
    channels = audio.options.get("channels", "mono")
    if _is_audio_policy(augment) and channels != "mono":
        # its ops read (B, L) as waveforms and (B, n_mels, frames) as features: a (B, C, L)
        # stereo batch would pass as features (a frequency mask zeroing whole channels)
        raise AugmentError(
            f"AudioAugment serves mono audio; the field {audio.name!r} keeps {channels} "
            "channels: build with --channels mono, or use augment=None and augment the "
            "channels yourself"
        )
    classes = _label(fields).options.get("classes")
    want = augment.num_classes if _is_audio_policy(augment) and augment.mixes else None
    if want is not None and classes is not None and want != classes:
        raise AugmentError(
            f"the label field has {classes} classes; AudioAugment(num_classes="
            f"{want}) would give targets of another width"
        )


def apply_audio_fields(
    policy: AudioPolicy,
    values: Mapping[str, torch.Tensor],
    fields: Sequence[FieldSpec],
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """Augment a v2 batch: the audio field, ``FIELD.length`` and the label by one draw.

    Returns:
        ``values`` with the audio field float32, ``FIELD.length`` int64 and, when mixing,
        the label as ``(B, num_classes)`` float32 soft targets; other entries as given.
    """
    audio = audio_field(fields)
    if audio is None:
        raise AugmentError("AudioAugment needs a field of kind audio")
    label, length = _label(fields).name, f"{audio.name}.length"
    missing = sorted({audio.name, length, label} - set(values))
    if missing:
        raise AugmentError(f"the audio batch lacks {missing}")
    batch = {"audio": values[audio.name], "length": values[length], "label": values[label]}
    out = policy(batch, generator)
    return {**values, audio.name: out["audio"], length: out["length"], label: out["label"]}
