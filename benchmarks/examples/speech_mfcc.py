"""MFCCs of speech, computed once in the build, standardised by the store's own statistics.

``python -m benchmarks.examples.speech_mfcc [--quick] [--work DIR] [--epochs N]``:

1. synthesises spoken vowels /a/, /i/, /u/ (a glottal pulse train at a random pitch through
   the vowel's three formant resonators in parallel, jittered per speaker, with breath
   noise), 0.4 to 0.9 s each, as 16 kHz WAV files in class folders, one set for training,
   one held out;
2. builds both as MFCC stores: ``precompute build vowels/ --clip-seconds 1 --features mfcc
   --n-mfcc 13 --n-mels 40 --f-min 60 --f-max 7600`` (float32 ``(13, 101)`` per clip, and
   each coefficient's mean and std over every valid frame in ``report.band_stats``);
3. trains a small classifier (a 1-D convolution over time, mean over the valid frames) from
   ``StoreLoader(..., augment=AudioAugment(normalize="store", time_masks=2, ...))``: the
   features standardised with the training store's statistics on the device, no
   preprocessing step in the loop;
4. prints the held-out accuracy after each epoch next to chance (1/3).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from scipy.signal import lfilter
from torch import nn

from benchmarks.examples.stores import work_folder
from loaders import StoreLoader
from loaders.augment import AudioAugment
from precompute.format.layout import open_store_info
from precompute.job import build
from precompute.sources.resolve import infer_fields
from precompute.spec import BuildSpec

__all__ = ["VOWELS", "main", "make_vowels"]

RATE = 16000
VOWELS = {"a": (730, 1090, 2440), "i": (270, 2290, 3010), "u": (300, 870, 2240)}
FEATURES = {"clip_seconds": 1.0, "representation": "mfcc", "n_mfcc": 13, "n_mels": 40,
            "f_min": 60.0, "f_max": 7600.0}  # fmt: skip


def _vowel(formants: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """One utterance: pulses at a pitch, through three resonators, with a fade and noise."""
    seconds = rng.uniform(0.4, 0.9)
    n = int(seconds * RATE)
    f0 = rng.uniform(90, 220)
    pulses = np.zeros(n)
    pulses[(np.arange(0, n, RATE / f0)).astype(int)] = 1.0
    wave = np.zeros(n)
    for f, gain in zip(formants, (1.0, 0.6, 0.3), strict=True):  # parallel formants
        f = f * rng.uniform(0.95, 1.05)  # the speaker's vocal tract
        r = np.exp(-np.pi * 90 / RATE)  # a 90 Hz bandwidth
        res = lfilter([1.0], [1, -2 * r * np.cos(2 * np.pi * f / RATE), r * r], pulses)
        wave += gain * res / np.abs(res).max()
    fade = np.minimum(1, np.minimum(np.arange(n), np.arange(n)[::-1]) / (0.05 * RATE))
    wave = wave * fade + rng.normal(0, 0.002, n)
    out: np.ndarray = (0.5 * wave / np.abs(wave).max()).astype(np.float32)
    return out


def make_vowels(root: Path, per_class: int, seed: int) -> Path:
    """``per_class`` WAV files of each vowel in ``root/<vowel>/``; return ``root``."""
    rng = np.random.default_rng(seed)
    for name, formants in VOWELS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            sf.write(root / name / f"{i:03d}.wav", _vowel(formants, rng), RATE)
    return root


class VowelNet(nn.Module):
    """``(B, 13, T)`` standardised MFCCs -> 3 logits: a 1-D convolution, a masked mean."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(13, width, 5, padding=2), nn.ReLU(), nn.Conv1d(width, width, 5, padding=2)
        )
        self.head = nn.Linear(width, len(VOWELS))

    def forward(self, x: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        valid = (torch.arange(x.shape[-1], device=x.device)[None, :] < length[:, None]).float()
        pooled = (h * valid[:, None]).sum(-1) / valid.sum(-1, keepdim=True).clamp(min=1)
        return self.head(pooled)  # type: ignore[no-any-return]


def _store(src: Path, out: Path) -> Path:
    fields = infer_fields(str(src), {"audio": FEATURES})
    build(str(src), str(out), BuildSpec(fields=fields), progress=False)
    return out


def _accuracy(model: VowelNet, store: Path, policy: AudioAugment) -> float:
    loader = StoreLoader(store, 16, augment=policy, shuffle=False, drop_last=False)
    right = total = 0
    with torch.no_grad():
        for b in loader:
            keep = ~b["is_pad"]
            pred = model(b["audio"], b["audio.length"]).argmax(1)
            right += int((pred == b["label"])[keep].sum())
            total += int(keep.sum())
    return right / max(total, 1)


def main(argv: Sequence[str] | None = None) -> list[float]:
    """Run the example; return the held-out accuracy after each epoch."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer clips and epochs.")
    parser.add_argument("--work", type=Path, help="Working folder (default: a temporary one).")
    parser.add_argument("--epochs", type=int, help="Training epochs (default 8, quick 6).")
    args = parser.parse_args(argv)
    per_class, epochs = (12, 6) if args.quick else (60, 8)
    torch.manual_seed(0)
    with work_folder(args.work) as work:
        train = _store(make_vowels(work / "train", per_class, 1), work / "train.zarr")
        val = _store(make_vowels(work / "val", per_class // 2, 2), work / "val.zarr")
        stats = open_store_info(train).report["band_stats"]["audio"]
        print(f"stored: {len(stats['mean'])} MFCCs x {stats['count'][0]} valid frames; "
              f"c0 mean {stats['mean'][0]:.1f}, std {stats['std'][0]:.1f}")  # fmt: skip
        # the training store's statistics for both stores, as a model is served
        base = AudioAugment(normalize="store").bind_store(open_store_info(train).fields, {
            "band_stats": {"audio": stats}})  # fmt: skip
        augment = AudioAugment(time_masks=2, time_mask_width=8, mean=base.mean, std=base.std)
        model = VowelNet()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        history = []
        loader = StoreLoader(train, 8, augment=augment, seed=0)
        for epoch in range(args.epochs or epochs):
            model.train()
            for b in loader:
                loss = nn.functional.cross_entropy(model(b["audio"], b["audio.length"]),
                                                   b["label"])  # fmt: skip
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            history.append(_accuracy(model, val, base))
            print(f"epoch {epoch}: held-out accuracy {history[-1]:.2f} (chance 0.33)")
    return history


if __name__ == "__main__":
    main()
