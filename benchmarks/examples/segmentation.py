"""Segmentation on a mask store: a small U-Net, Dice + cross-entropy, Dice per class each epoch.

``python -m benchmarks.examples.segmentation [--quick] [--work DIR] [--epochs N]``:

1. writes a segmentation folder (``images/`` + ``masks/`` PNG pairs, 4 classes:
   background and three shapes, :func:`benchmarks.fields_data.make_segmentation`) for training
   and one for validation;
2. builds a mask store of each (``precompute.job.build``, fields ``image`` + ``mask``);
3. trains a ``LightningModule`` from a ``LightningDataModule`` whose loaders are
   ``StoreLoader``: random resized crop + flip (``TrainAugment``, applied to image and mask
   with one draw) for training, the centre crop (``EvalAugment``) for validation;
4. prints the validation Dice per class after each epoch, and the Dice of the trivial
   prediction (every pixel background) on the same masks.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.examples.stores import (
    add_common_args,
    build_stores,
    conv_block,
    trainer,
    trainer_device,
    work_folder,
)
from benchmarks.fields_data import make_segmentation
from loaders import StoreLoader
from loaders.augment import EvalAugment, TrainAugment
from loaders.augment.image.ops import CenterCrop, HorizontalFlip, RandomResizedCrop
from precompute.fields import FieldSpec
from precompute.spec import BuildSpec

__all__ = ["SegmentationData", "SegmentationModule", "dice_scores", "main"]

CLASSES = 4
IGNORE = 255  # the mask's ignore index (letterbox padding; none here: mode "crop")
STORE_SIZE, CROP = 64, 48


class TinyUNet(nn.Module):
    """Two levels down, two up, skip connections; ``[B, 3, H, W] -> [B, classes, H, W]``."""

    def __init__(self, classes: int, width: int = 16) -> None:
        super().__init__()
        self.enc1, self.enc2 = conv_block(3, width), conv_block(width, 2 * width)
        self.mid = conv_block(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = conv_block(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = conv_block(2 * width, width)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return per-pixel class logits."""
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        out: torch.Tensor = self.head(self.dec1(torch.cat([self.up1(d2), e1], 1)))
        return out


def soft_dice_loss(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - mean soft Dice over classes; pixels at the ignore index count for nothing."""
    keep = (mask != IGNORE).unsqueeze(1).float()
    target = F.one_hot(mask.long().clamp(max=CLASSES - 1), CLASSES).permute(0, 3, 1, 2).float()
    probs = logits.softmax(1) * keep
    target = target * keep
    inter = (probs * target).sum((0, 2, 3))
    total = probs.sum((0, 2, 3)) + target.sum((0, 2, 3))
    return 1 - ((2 * inter + 1) / (total + 1)).mean()


def dice_counts(pred: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[3, classes]``: per class, intersection, predicted and true pixel counts."""
    keep = mask != IGNORE
    rows = []
    for c in range(CLASSES):
        p, t = (pred == c) & keep, (mask == c) & keep
        rows.append(torch.stack([(p & t).sum(), p.sum(), t.sum()]))
    return torch.stack(rows, 1).double()


def dice_scores(counts: torch.Tensor) -> list[float]:
    """Dice per class from summed :func:`dice_counts` (1.0 for a class absent from both)."""
    inter, pred, true = counts
    total = pred + true
    return [1.0 if t == 0 else float(2 * i / t) for i, t in zip(inter, total, strict=True)]


class SegmentationModule(L.LightningModule):
    """The U-Net, trained on Dice + cross-entropy; validation Dice per class each epoch."""

    def __init__(self, lr: float = 3e-3) -> None:
        super().__init__()
        self.net, self.lr = TinyUNet(CLASSES), lr
        self.counts = torch.zeros(3, CLASSES, dtype=torch.float64)
        self.baseline = torch.zeros(3, CLASSES, dtype=torch.float64)
        self.history: list[tuple[list[float], list[float]]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """Cross-entropy + soft Dice on the augmented batch."""
        logits, mask = self.net(batch["image"]), batch["mask"]
        ce = F.cross_entropy(logits, mask.long(), ignore_index=IGNORE)
        return ce + soft_dice_loss(logits, mask)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        """Add the batch's Dice counts (model and all-background), padding left out."""
        real = ~batch["is_pad"]  # the last batch is padded to full size
        mask = batch["mask"][real]
        pred = self.net(batch["image"][real]).argmax(1)
        self.counts += dice_counts(pred, mask).cpu()
        self.baseline += dice_counts(torch.zeros_like(mask), mask).cpu()

    def on_validation_epoch_end(self) -> None:
        """Print the epoch's Dice per class next to the all-background Dice."""
        scores, trivial = dice_scores(self.counts), dice_scores(self.baseline)
        self.history.append((scores, trivial))
        print(
            f"epoch {self.current_epoch}: val Dice per class "
            f"{[round(s, 3) for s in scores]} mean {sum(scores) / CLASSES:.3f} "
            f"(all-background: mean {sum(trivial) / CLASSES:.3f})",
            flush=True,
        )
        self.counts.zero_()
        self.baseline.zero_()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """AdamW."""
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class SegmentationData(L.LightningDataModule):
    """``StoreLoader`` over the training and validation mask stores."""

    def __init__(self, train: Path, val: Path, batch_size: int, seed: int) -> None:
        super().__init__()
        self.train, self.val, self.batch_size, self.seed = train, val, batch_size, seed

    def train_dataloader(self) -> StoreLoader:
        """Random resized crop + flip, one draw for image and mask."""
        augment = TrainAugment(
            size=(CROP, CROP), crop=RandomResizedCrop(scale=(0.3, 1.0)), flip=HorizontalFlip(0.5)
        )
        device = trainer_device(self)
        return StoreLoader(
            self.train, self.batch_size, device=device, seed=self.seed, augment=augment
        )

    def val_dataloader(self) -> StoreLoader:
        """The centre crop, in store order, every sample (the last batch padded)."""
        augment = EvalAugment(size=(CROP, CROP), crop=CenterCrop(1.0))
        device = trainer_device(self)
        return StoreLoader(
            self.val,
            self.batch_size,
            device=device,
            shuffle=False,
            drop_last=False,
            augment=augment,
        )


def mask_spec() -> BuildSpec:
    """The build spec of a 4-class mask store (``precompute build SRC --mask-classes 4``)."""
    mask = FieldSpec("mask", "mask", {"classes": CLASSES, "ignore_index": IGNORE})
    return BuildSpec(size=STORE_SIZE, fields=(FieldSpec("image", "image", {}), mask))


def main(argv: Sequence[str] | None = None) -> list[tuple[list[float], list[float]]]:
    """Run the example; return ``(model, all-background)`` validation Dice per class, each epoch.

    The all-background prediction is the trivial baseline the model must beat.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    args = parser.parse_args(argv)
    n_train, n_val, epochs = (24, 8, 1) if args.quick else (160, 40, 6)
    epochs = args.epochs or epochs
    with work_folder(args.work) as work:
        train_src = make_segmentation(work / "train", n_train, size=(72, 112), seed=args.seed)
        val_src = make_segmentation(work / "val", n_val, size=(72, 112), seed=args.seed + 1)
        jobs = [(str(s), work / f"{s.name}.zarr", mask_spec()) for s in (train_src, val_src)]
        train, val = build_stores(jobs)
        torch.manual_seed(args.seed)  # the model's initial weights
        module = SegmentationModule()
        data = SegmentationData(train, val, batch_size=8 if args.quick else 16, seed=args.seed)
        trainer(epochs).fit(module, datamodule=data)
    return module.history


if __name__ == "__main__":
    main()
