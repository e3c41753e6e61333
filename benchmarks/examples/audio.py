"""Sound classification on a log-mel store: a small CNN trained with ``AudioAugment``.

``python -m benchmarks.examples.audio [--clips N] [--epochs E] [--work DIR]``:

1. writes a training and a held-out set of clips in class folders, mixed formats (WAV
   16/24-bit, FLAC, OGG/Vorbis, MP3), rates (8-48 kHz) and channel counts
   (:func:`benchmarks.audio_data.make_audio_dataset`, 4 classes of sound);
2. builds a log-mel store of each (``precompute.job.build``: fields ``audio`` + ``label``,
   16 kHz mono, 1 s clips, 64 mel bands), as ``precompute build SRC --out OUT
   --clip-seconds 1 --features logmel`` does;
3. trains a small CNN on the CPU with ``StoreLoader(..., augment=AudioAugment(...))``: a
   random 0.9 s crop, gain, SpecAugment time and frequency masks, mixup (soft targets);
4. prints the training loss per epoch and the held-out accuracy (chance: 1 / classes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from benchmarks.audio_data import make_audio_dataset
from loaders import StoreLoader
from loaders.augment import AudioAugment
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.spec import BuildSpec

__all__ = ["AudioNet", "build_store", "main"]

CLASSES = 4
N_MELS = 64
CROP = 90  # frames of the training crop (0.9 s of the stored 101)


class AudioNet(nn.Module):
    """Three conv blocks over (n_mels, frames), global average pooling, a linear head."""

    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        blocks: list[nn.Module] = [nn.BatchNorm2d(1)]
        for cin, cout in ((1, 16), (16, 32), (32, 64)):
            blocks += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                       nn.MaxPool2d(2)]  # fmt: skip
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(64, classes)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """``(B, n_mels, frames)`` dB features -> ``(B, classes)`` logits."""
        x = self.features(mel.unsqueeze(1).float() / 20.0)
        logits: torch.Tensor = self.head(x.mean(dim=(2, 3)))
        return logits


def build_store(src: Path, out: Path) -> Path:
    """Build the log-mel store of the class folders ``src`` at ``out``."""
    opts = {"clip_seconds": 1.0, "representation": "logmel", "n_mels": N_MELS}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    spec = BuildSpec(fields=fields, shard_samples=128)
    build(str(src), str(out), spec, progress=False, content_hash=True)
    return out


def _train_epoch(model: nn.Module, loader: StoreLoader, opt: torch.optim.Optimizer) -> float:
    model.train()
    total, batches = 0.0, 0
    for batch in loader:
        logits = model(batch["audio"])
        loss = torch.sum(-batch["label"] * torch.log_softmax(logits, 1), 1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total, batches = total + loss.item(), batches + 1
    return total / max(batches, 1)


@torch.no_grad()
def _accuracy(model: nn.Module, loader: StoreLoader) -> float:
    model.eval()
    right = seen = 0
    for batch in loader:
        keep = ~batch["is_pad"]
        pred = model(batch["audio"].float()).argmax(1)
        right += int((pred == batch["label"])[keep].sum())
        seen += int(keep.sum())
    return right / max(seen, 1)


def main(argv: Sequence[str] | None = None) -> float:
    """Generate, build, train and evaluate; print the loss per epoch and the accuracy.

    Returns:
        The held-out accuracy (chance: ``1 / CLASSES``).
    """
    ap = argparse.ArgumentParser(prog="python -m benchmarks.examples.audio")
    ap.add_argument("--clips", type=int, default=240, help="training clips (held out: 1/3)")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--work", help="work folder (default: a temporary one)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        t0 = time.perf_counter()
        make_audio_dataset(work / "train", args.clips, CLASSES, seed=0, seconds=(0.5, 2.0))
        make_audio_dataset(work / "test", args.clips // 3, CLASSES, seed=1, seconds=(0.5, 2.0))
        train, test = (build_store(work / n, work / f"{n}.zarr") for n in ("train", "test"))
        print(f"built log-mel stores of {args.clips} + {args.clips // 3} clips "
              f"in {time.perf_counter() - t0:.0f} s")  # fmt: skip
        policy = AudioAugment(
            crop=CROP, gain_db=(-6.0, 6.0), time_masks=2, time_mask_width=10, freq_masks=2,
            freq_mask_width=8, num_classes=CLASSES, mixup_alpha=0.2, mix_prob=0.5,
        )  # fmt: skip
        loader = StoreLoader(train, 32, seed=0, device="cpu", augment=policy)
        held_out = StoreLoader(test, 64, device="cpu", shuffle=False, drop_last=False)
        model = AudioNet()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for epoch in range(args.epochs):
            loss = _train_epoch(model, loader, opt)
            print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss:.3f}")
        acc = _accuracy(model, held_out)
        print(f"held-out accuracy {acc:.3f} over {args.clips // 3} clips "
              f"(chance {1 / CLASSES:.3f})")  # fmt: skip
    return acc


if __name__ == "__main__":
    main()
