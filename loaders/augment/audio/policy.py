"""``AudioAugment``: a seeded audio policy for batches of the ``audio`` field kind.

A batch is ``{"audio": (B, L) waveforms or (B, n_mels, frames) log-mel features, "label":
(B,) int64, "length": (B,) valid samples or frames}``, as a store's ``audio`` field, its
``audio.length`` companion and a ``label`` field give it. The loader passes the batch's
generator (``ContractLoader.batch_generator``), so a resumed run draws what an uninterrupted
one would. Ops, in this order, each off unless given: a random crop/shift to ``crop`` steps,
gain in dB, additive noise at an SNR (waveforms), SpecAugment time and frequency masks, then
mixup or cutmix along time. ``AudioAugment()`` is the identity: it only converts the stored
values to float32 (int16 waveforms as ``k / 32768``, float16 features exactly). Rules and
ranges: ``docs/audio.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from loaders.augment.audio import ops as audio_ops
from loaders.augment.audio.fields import apply_audio_fields, audio_field
from loaders.augment.checks import check_integer, check_labels, check_number, check_pair
from loaders.augment.draws import smooth_targets
from loaders.augment.errors import AugmentError, refuse_unknown
from precompute.fields import FieldSpec
from precompute.kinds.audio import INT16_SCALE  # the stored waveforms' int16 scale

__all__ = ["AudioAugment"]

_RANGES = {"gain_db": (-60.0, 60.0), "noise_snr_db": (-20.0, 100.0)}
_COUNTS = {"time_masks": 32, "freq_masks": 32, "time_mask_width": 1 << 20, "freq_mask_width": 4096}


@dataclass(frozen=True)
class AudioAugment:
    """Audio augmentation policy (as data) and its batched application.

    Attributes:
        crop: Steps (samples or frames) to cut from each clip at a random start inside its
            valid length; None keeps the stored length.
        gain_db: ``(low, high)``: a gain uniform in dB per clip; on dB features it is added.
        noise_snr_db: ``(low, high)``: Gaussian noise at an SNR uniform in dB per clip,
            relative to the clip's mean power over its valid length (waveforms only).
        time_masks: Time masks per clip, each up to ``time_mask_width`` steps, inside the
            valid length.
        time_mask_width: Widest time mask.
        freq_masks: Frequency masks per clip (features only), each up to ``freq_mask_width``
            mel bands.
        freq_mask_width: Widest frequency mask.
        mask_value: What masked steps and bands become: a number, ``"min"`` (each clip's
            minimum over its valid steps: the floor of a dB feature, a silence), or None
            (the default: ``"min"`` for features, 0.0 for waveforms). A 0 in a stored
            log-mel (about -70 to +26 dB, mean about -41) is a loud stripe, not a silence.
        num_classes: Classes of the soft targets that mixing returns (needed to mix).
        mixup_alpha: Beta concentration of mixup's lambda; 0 disables mixup.
        cutmix_alpha: Beta concentration of cutmix's lambda; 0 disables cutmix.
        mix_prob: Probability that a batch is mixed at all.
        switch_prob: Probability of cutmix rather than mixup when both are enabled.
        normalize: ``"store"``: standardise features band by band, ``(x - mean) / std``,
            with the per-band statistics the build stored (``report.band_stats``: each mel
            band's or MFCC's over the valid frames); bound by the StoreLoader when it opens
            the store. None (default): as stored. Applied first, so masks and mixing see
            standardised features.
        mean: Per-band means to standardise with (``normalize="store"`` fills them).
        std: Per-band standard deviations (a band's 0 is taken as 1).
    """

    serves_audio: ClassVar[bool] = True  # the loader's check of a store's audio policies

    crop: int | None = None
    gain_db: tuple[float, float] | None = None
    noise_snr_db: tuple[float, float] | None = None
    time_masks: int = 0
    time_mask_width: int = 0
    freq_masks: int = 0
    freq_mask_width: int = 0
    mask_value: float | str | None = None
    num_classes: int | None = None
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    mix_prob: float = 1.0
    switch_prob: float = 0.5
    normalize: str | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.crop is not None:
            check_integer("audio.crop", self.crop, 1, (1 << 31) - 1)
        for name, (lo, hi) in _RANGES.items():
            if getattr(self, name) is not None:
                pair = check_pair(f"audio.{name}", getattr(self, name), lo, hi, "dB")
                object.__setattr__(self, name, pair)  # a list given: kept as a (hashable) tuple
        for name, hi in _COUNTS.items():
            check_integer(f"audio.{name}", getattr(self, name), 0, hi)
        for axis in ("time", "freq"):
            if getattr(self, f"{axis}_masks") and not getattr(self, f"{axis}_mask_width"):
                raise AugmentError(f"audio.{axis}_masks needs {axis}_mask_width >= 1")
        if self.mask_value is not None and self.mask_value != "min":
            if isinstance(self.mask_value, str):
                raise AugmentError(
                    f"audio.mask_value must be a number, 'min' or None, got {self.mask_value!r}"
                )
            check_number("audio.mask_value", self.mask_value, -1e4, 1e4)
        for name in ("mixup_alpha", "cutmix_alpha"):
            check_number(f"audio.{name}", getattr(self, name), 0.0, 100.0)
        self._check_normalize()
        check_number("audio.mix_prob", self.mix_prob, 0.0, 1.0)
        check_number("audio.switch_prob", self.switch_prob, 0.0, 1.0)
        if self.mixes or self.num_classes is not None:
            check_integer("audio.num_classes", self.num_classes, 1, 1 << 24)
        if self.mixes and self.num_classes == 1:
            raise AugmentError(
                "audio mixing needs num_classes >= 2: with one class every mixed target is "
                "1.0 and mixing only blurs the clips; set mixup_alpha and cutmix_alpha to 0"
            )

    def _check_normalize(self) -> None:
        if self.normalize not in (None, "store"):
            raise AugmentError(f"audio.normalize must be 'store' or None, got {self.normalize!r}")
        if (self.mean is None) != (self.std is None):
            raise AugmentError("audio.mean and audio.std go together")
        if self.mean is not None and self.std is not None:
            mean, std = tuple(map(float, self.mean)), tuple(map(float, self.std))
            if len(mean) != len(std) or not mean:
                raise AugmentError(f"audio.mean has {len(mean)} bands, audio.std {len(std)}")
            object.__setattr__(self, "mean", mean)
            object.__setattr__(self, "std", tuple(s if s > 0 else 1.0 for s in std))

    def bind_store(self, fields: Sequence[FieldSpec], report: Mapping[str, Any]) -> AudioAugment:
        """This policy with ``normalize="store"`` given the store's per-band statistics.

        Called by the StoreLoader when it opens a store (its ``report``).

        Raises:
            AugmentError: The store's audio field is a waveform (no bands: statistics are a
                feature store's), or a feature store built before they were stored (rebuild
                it, or give mean and std).
        """
        if self.normalize != "store" or self.mean is not None:
            return self
        field = audio_field(fields)
        names = [field.name] if field is not None else []
        if field is not None and field.options.get("representation") == "waveform":
            raise AugmentError(
                f"audio.normalize='store': field {field.name!r} holds waveforms, which have no "
                "bands: per-band statistics are a feature store's (build with --features "
                "logmel or mfcc to standardise its bands); a waveform is served as samples "
                "in [-1, 1) (k / 32768), so leave normalize=None for it"
            )
        stats = report.get("band_stats", {}).get(names[0]) if names else None
        if stats is None:
            raise AugmentError(
                f"audio.normalize='store': the store holds no per-band statistics of "
                f"{names or 'an audio field'} (report.band_stats: features built by this "
                "version); rebuild it, or give mean and std"
            )
        mean = tuple(0.0 if m is None else float(m) for m in stats["mean"])
        std = tuple(float(s) if s else 1.0 for s in stats["std"])
        return dataclasses.replace(self, mean=mean, std=std)

    def _standardise(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / std`` over the band axis of ``(B, M, T)`` features."""
        if self.mean is None or self.std is None:
            raise AugmentError(
                "audio.normalize='store' takes the store's statistics: give the policy to a "
                "StoreLoader, or give mean and std"
            )
        if x.dim() != 3 or x.shape[1] != len(self.mean):
            raise AugmentError(
                f"audio.normalize: {len(self.mean)} bands to standardise, the batch is "
                f"{tuple(x.shape)} (features (B, bands, frames))"
            )
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device)[:, None]
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device)[:, None]
        return (x - mean) / std

    @property
    def mixes(self) -> bool:
        """Mixup or cutmix is on: labels come back as ``(B, num_classes)`` soft targets."""
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (pairs as lists)."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AudioAugment:
        """Parse a dict made by :meth:`to_dict` (unknown keys raise)."""
        refuse_unknown(cls, data, "audio")
        pairs = {k: tuple(v) for k, v in data.items() if k in _RANGES and isinstance(v, list)}
        return cls(**{**data, **pairs})

    def apply_fields(
        self,
        values: Mapping[str, torch.Tensor],
        fields: Sequence[FieldSpec],
        extents: torch.Tensor,
        generator: torch.Generator,
    ) -> dict[str, torch.Tensor]:
        """The loader's call on a v2 store: the audio field, ``FIELD.length`` and the label.

        ``extents`` (the image frame's) is unused. See
        :func:`~loaders.augment.audio.fields.apply_audio_fields`.
        """
        return apply_audio_fields(self, values, fields, generator)

    def _inputs(
        self, batch: Mapping[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        missing = sorted({"audio", "label", "length"} - set(batch))
        if missing:
            raise AugmentError(f"audio batch lacks {missing}; it needs audio, label, length")
        audio, length = batch["audio"], batch["length"]
        if audio.dim() not in (2, 3) or audio.dtype not in (
            torch.int16,
            torch.float16,
            torch.float32,
        ):
            raise AugmentError(
                "audio must be (B, L) or (B, n_mels, frames) int16/float16/float32, "
                f"got {tuple(audio.shape)} {audio.dtype}"
            )
        b = audio.shape[0]
        if tuple(length.shape) != (b,) or length.is_floating_point():
            raise AugmentError(
                f"length must be [{b}] integer, got {tuple(length.shape)} {length.dtype}"
            )
        if tuple(batch["label"].shape[:1]) != (b,):
            raise AugmentError(f"label must have {b} rows, got {tuple(batch['label'].shape)}")
        if not isinstance(generator, torch.Generator):
            raise AugmentError(f"generator must be a torch.Generator, got {generator!r}")
        if generator.device.type != audio.device.type:
            raise AugmentError(
                f"the generator is on {generator.device}, the audio on {audio.device}"
            )
        self._check_kind(audio)
        x = audio.to(torch.float32)
        if audio.dtype == torch.int16:
            x = x / INT16_SCALE  # a power of two: exactly precompute's from_int16
        steps = length.to(device=audio.device, dtype=torch.int64)
        return x, steps.clamp(0, audio.shape[-1])  # a length past the stored axis is all of it

    def _check_kind(self, audio: torch.Tensor) -> None:
        features = audio.dim() == 3
        if features and self.noise_snr_db is not None:
            raise AugmentError(
                "audio.noise_snr_db needs waveforms (B, L); the batch holds features"
            )
        if not features and self.freq_masks:
            raise AugmentError("audio.freq_masks needs features (B, n_mels, frames); got waveforms")
        if self.crop is not None and self.crop > audio.shape[-1]:
            raise AugmentError(
                f"audio.crop {self.crop} is longer than the stored {audio.shape[-1]} steps"
            )

    def __call__(
        self, batch: Mapping[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """Return a new batch dict: ``audio`` float32, ``length`` int64, ``label``.

        ``label`` is unchanged (int64) unless mixing is on; then it is ``(B, num_classes)``
        float32 targets (one-hot where a batch is not mixed). Other keys pass through.

        Raises:
            AugmentError: A batch that lacks a key, has a wrong shape, dtype or device, or
                holds features where an op needs waveforms (or the reverse).
        """
        x, length = self._inputs(batch, generator)
        features = x.dim() == 3
        if self.normalize is not None or self.mean is not None:
            x = self._standardise(x)
        if self.crop is not None:
            x, length = audio_ops.crop(x, length, self.crop, generator)
        if self.gain_db is not None:
            x = audio_ops.gain(x, *self.gain_db, features, generator)
        if self.noise_snr_db is not None:
            x = audio_ops.noise(x, length, *self.noise_snr_db, generator)
        if self.time_masks or self.freq_masks:
            fill = self._fill(x, length, features)
        if self.time_masks:
            x = audio_ops.mask_spans(
                x, length, self.time_masks, self.time_mask_width, -1, fill, generator
            )
        if self.freq_masks:
            bands = torch.full_like(length, x.shape[1])
            x = audio_ops.mask_spans(
                x, bands, self.freq_masks, self.freq_mask_width, 1, fill, generator
            )
        out = {**batch, "audio": x, "length": length}
        if self.mixes:
            out["audio"], out["length"], out["label"] = self._mix(
                x, length, batch["label"], generator
            )
        return out

    def _fill(self, x: torch.Tensor, length: torch.Tensor, features: bool) -> torch.Tensor:
        """``(B,)`` float32: what each clip's masked steps become (see ``mask_value``)."""
        rule = self.mask_value
        if rule is None:
            rule = "min" if features else 0.0
        if rule != "min":
            return torch.full((x.shape[0],), float(rule), device=x.device)
        return audio_ops.valid_min(x, length)

    def _mix(
        self, x: torch.Tensor, length: torch.Tensor, label: torch.Tensor, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        classes = int(self.num_classes or 0)  # >= 1 when mixing (checked in __post_init__)
        if label.dtype != torch.int64 or label.dim() != 1:
            raise AugmentError(
                f"mixing needs (B,) int64 labels, got {tuple(label.shape)} {label.dtype}"
            )
        check_labels(label, classes, "audio mixing")
        targets = smooth_targets(label.to(x.device), classes, 0.0)
        switch = (
            1.0 if self.mixup_alpha == 0 else 0.0 if self.cutmix_alpha == 0 else self.switch_prob
        )
        alphas = (self.mixup_alpha, self.cutmix_alpha)
        return audio_ops.mix(x, length, targets, alphas, self.mix_prob, switch, gen)
