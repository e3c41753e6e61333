"""Audio classification (audio + label): a random crop in time and SpecAugment masks.

Every strategy serves log-mel crops float32 ``[B, n_mels, crop]`` (or waveform crops
``[B, crop]`` of a ``waveform`` store) and ``label`` int64 ``[B]``: from each clip (decoded,
resampled to the stored rate, mono, its centre cut or padded to ``--clip-seconds``, the
log-mel of the build's definition) a window of 90% of its steps at a random start inside its
valid length, then, for log-mel, two time masks (up to a tenth of the steps) and two frequency
masks (up to an eighth of the bands) filled with the clip's minimum; for waveforms a random
gain of -6..6 dB. ``StoreLoader`` does it with :class:`loaders.augment.AudioAugment`; the
``workers`` strategy does the same in numpy per item, after soundfile + soxr decoding and the
log-mel on the CPU. ``gpu-decode`` and ``tf-native`` decode with DALI and TensorFlow
(:mod:`benchmarks.harness.native`). The model consumer trains a 2-D conv net on log-mel, a
1-D one on waveforms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, Workload, register_workload
from benchmarks.harness.workloads.classify import local_files
from benchmarks.harness.workloads.nets import ConvNet, WaveNet

__all__ = ["Audio", "AudioPolicy", "mask_spans", "spec_augment"]

GAIN_DB = (-6.0, 6.0)


@dataclass(frozen=True)
class AudioPolicy:
    """The audio field's stored form and the augmentation every strategy applies to it.

    Attributes:
        logmel: Log-mel features (else int16 waveforms).
        rate: Stored sample rate.
        samples: Samples per clip.
        steps: Stored time steps (frames of a log-mel, samples of a waveform).
        n_mels, n_fft, hop: The log-mel's parameters.
        crop: Time steps of the random window.
        time_width, freq_width: Widest time and frequency mask (two of each, log-mel only).
    """

    logmel: bool
    rate: int
    samples: int
    steps: int
    n_mels: int
    n_fft: int
    hop: int
    crop: int
    time_width: int
    freq_width: int

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> AudioPolicy:
        """The policy of an audio field's options."""
        rate = int(options["sample_rate"])
        samples = round(float(options["clip_seconds"]) * rate)
        if options["representation"] not in ("waveform", "logmel"):
            raise ValueError(
                f"the benchmark's audio strategies compute waveforms or log-mels; "
                f"{options['representation']!r} features are not compared (build them with "
                "precompute build, and time StoreLoader on them)"
            )
        logmel = options["representation"] == "logmel"
        # a waveform's options hold no log-mel parameters (Kind.unused leaves them out)
        hop, n_mels, n_fft = (
            (int(options["hop_length"]), int(options["n_mels"]), int(options["n_fft"]))
            if logmel
            else (1, 0, 0)
        )
        steps = 1 + samples // hop if logmel else samples
        crop = max(1, round(0.9 * steps))
        return cls(logmel, rate, samples, steps, n_mels, n_fft, hop, crop,
                   max(1, crop // 10), max(1, n_mels // 8))  # fmt: skip

    def draw(self, valid: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
        """One clip's crop start, and its keep mask (log-mel, 0 where masked) or gain.

        The draws of :func:`spec_augment`, for an engine that applies them itself (DALI).
        """
        start = int(rng.integers(0, max(valid - self.crop, 0) + 1))
        if not self.logmel:
            return start, np.array([10 ** (rng.uniform(*GAIN_DB) / 20)], np.float32)
        keep = np.ones((self.n_mels, self.crop), np.float32)
        for s, w in mask_spans(rng, max(0, min(valid - start, self.crop)), self.time_width):
            keep[:, s : s + w] = 0.0
        for s, w in mask_spans(rng, self.n_mels, self.freq_width):
            keep[s : s + w, :] = 0.0
        return start, keep

    def augment(self) -> Any:
        """The :class:`loaders.augment.AudioAugment` of this policy."""
        from loaders.augment import AudioAugment

        if not self.logmel:
            return AudioAugment(crop=self.crop, gain_db=GAIN_DB)
        return AudioAugment(crop=self.crop, time_masks=2, time_mask_width=self.time_width,
                            freq_masks=2, freq_mask_width=self.freq_width)  # fmt: skip


def mask_spans(rng: np.random.Generator, extent: int, width: int) -> list[tuple[int, int]]:
    """Two mask spans inside ``[0, extent)``: width uniform in ``[0, min(width, extent)]``."""
    out = []
    for _ in range(2):
        w = int(rng.integers(0, min(width, extent) + 1))
        out.append((int(rng.integers(0, extent - w + 1)), w))
    return out


def spec_augment(
    x: np.ndarray, valid: int, policy: AudioPolicy, rng: np.random.Generator
) -> np.ndarray:
    """The policy's crop and masks (log-mel) or gain (waveform) of one stored clip, float32."""
    start = int(rng.integers(0, max(valid - policy.crop, 0) + 1))
    out = np.asarray(x[..., start : start + policy.crop], np.float32)
    if out.shape[-1] < policy.crop:  # a clip shorter than the window: zero steps after it
        pad = [(0, 0)] * (out.ndim - 1) + [(0, policy.crop - out.shape[-1])]
        out = np.pad(out, pad)
    if not policy.logmel:
        return out * np.float32(10 ** (rng.uniform(*GAIN_DB) / 20) / 32768.0)
    length = max(0, min(valid - start, policy.crop))
    low = float(out[:, :length].min()) if length else 0.0
    out = out.copy()
    for s, w in mask_spans(rng, length, policy.time_width):
        out[:, s : s + w] = low
    for s, w in mask_spans(rng, policy.n_mels, policy.freq_width):
        out[s : s + w, :] = low
    return out


class _Mel2d(nn.Module):
    """``[B, n_mels, T]`` -> the 2-D net on ``[B, 1, n_mels, T]``."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.net = ConvNet(1, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x.unsqueeze(1))
        return out


@register_workload
class Audio(Workload):
    """Audio classification."""

    name = "audio"
    kinds = ("audio", "label")
    task = "audio classification (audio + label)"
    engines = ("gpu-decode", "tf-native")

    @property
    def policy(self) -> AudioPolicy:
        """The audio field's stored form and the augmentation."""
        return AudioPolicy.of(self.plan.field_spec(self.input).options)

    classic_text = (
        "decode (soundfile) + resample (soxr) + centre clip + the stored features (log-mel "
        "on the CPU), a random crop + time/freq masks (log-mel) or gain (waveform) per item"
    )

    @property
    def stored(self) -> str:
        """A clip's seconds and rate, and its log-mel bands x frames (or waveform samples)."""
        p = self.policy
        opts = self.plan.field_spec(self.input).options
        clip = f"{self.input}: {float(opts['clip_seconds']):g} s clips at {p.rate} Hz"
        if p.logmel:
            return f"{clip}, log-mel {p.n_mels} x {p.steps} (n_mels x frames)"
        return f"{clip}, waveforms of {p.samples} samples ({opts['channels']})"

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        p = self.policy
        masks = ", 2 time + 2 freq masks" if p.logmel else ", gain -6..6 dB"
        return f"AudioAugment(crop {p.crop} of {p.steps} steps{masks})"

    def classic(self, seed: int) -> Transform:
        """Decode (the build's decoder: soundfile, soxr, log-mel), then crop and mask."""
        audio, label, policy = self.input, self.target, self.policy

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            valid = int(values[f"{audio}.length"])
            x = spec_augment(values[audio], valid, policy, rng)
            return torch.from_numpy(x), torch.tensor(int(values[label]))

        return transform

    def store_augment(self, threads: int) -> Any:
        """:class:`loaders.augment.AudioAugment` of the policy (its mixup with ``--mixup``)."""
        import dataclasses

        from benchmarks.harness.sources import num_classes

        augment = self.policy.augment()
        if not self.mixup:
            return augment
        return dataclasses.replace(augment, mixup_alpha=self.mixup,
                                   num_classes=num_classes(self.plan))  # fmt: skip

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A 2-D conv net on log-mel, a 1-D one on waveforms; cross-entropy."""
        from benchmarks.harness.sources import num_classes

        classes = num_classes(self.plan)
        if self.policy.logmel:
            return _Mel2d(classes), nn.functional.cross_entropy
        channels = self.plan.field_spec(self.input).options["channels"]
        return WaveNet(1 if channels == "mono" else int(channels), classes), (
            nn.functional.cross_entropy
        )

    def served(self) -> str:
        """What a batch holds."""
        p = self.policy
        x = f"[B, {p.n_mels}, {p.crop}] log-mel dB" if p.logmel else f"[B, {p.crop}] waveform"
        return f"{self.input} float32 {x}, {self.target} int64 [B]"

    def _native_checks(self, engine: str) -> list[str]:
        self.one_label(engine)
        opts = self.plan.field_spec(self.input).options
        if opts["clips"] != "center" or opts["channels"] != "mono":
            raise NotApplicable(
                "it decodes one mono clip per file (--clips center, --channels mono); this "
                f"store has --clips {opts['clips']} --channels {opts['channels']}"
            )
        return local_files(self.plan, self.input)

    def tf_native(self, cfg: Any) -> Any:
        """``tf.audio.decode_wav`` + resample + ``tf.signal.stft`` + a mel matrix in tf.data."""
        from benchmarks.harness.native.tf_audio import audio_source

        labels = [int(item.value(self.target)) for item in self.plan.source.items]
        return audio_source(self._native_checks("the tf.data pipeline"), labels, self.policy, cfg)

    def gpu_decode(self, cfg: Any) -> Any:
        """``fn.decoders.audio`` + ``fn.spectrogram`` + ``fn.mel_filter_bank`` in DALI."""
        from benchmarks.harness.native.dali_audio import audio_source

        labels = [int(item.value(self.target)) for item in self.plan.source.items]
        return audio_source(self._native_checks("the DALI graph"), labels, self.policy, cfg)
