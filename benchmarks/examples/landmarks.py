"""Landmark detection on a keypoints store: heatmaps + soft-argmax, mean radial error in pixels.

``python -m benchmarks.examples.landmarks [--quick] [--work DIR] [--epochs N]``:

1. writes grey "X-rays" with 19 landmarks each and their manifest (``image,keypoints``,
   :func:`benchmarks.fields_data.make_landmarks`), one for training and one held out;
2. builds a keypoints store of each (``precompute.job.build``, letterbox: the manifest's
   points are mapped exactly into the stored frame);
3. trains a small fully convolutional net (one heatmap per landmark against a Gaussian at
   the point, soft-argmax to coordinates, coordinate channels so it knows which blob is
   which) from ``StoreLoader``: random resized crop for training (``TrainAugment``; the
   points follow the crop exactly; no flip: the landmarks have no left/right pairs), the
   centre crop for evaluation;
4. prints the mean radial error on the held-out store after each epoch, in pixels of the
   network's input frame, next to the trivial predictor that answers the training set's mean
   shape for every image. Points the crop leaves out (visibility 0) are not scored.
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
from benchmarks.fields_data import make_landmarks
from loaders import StoreLoader
from loaders.augment import EvalAugment, TrainAugment
from loaders.augment.image.ops import CenterCrop, RandomResizedCrop
from precompute.fields import FieldSpec
from precompute.spec import BuildSpec

__all__ = ["LandmarkData", "LandmarkModule", "heatmap_loss", "main", "radial_errors", "soft_argmax"]

POINTS = 19
STORE_SIZE, INPUT = 72, 64


def _coords(x: torch.Tensor) -> torch.Tensor:
    """``x`` with two channels more: the pixel-centre x and y over the frame, in [-1, 1]."""
    b, _, h, w = x.shape
    ys = torch.linspace(-1, 1, h, device=x.device).view(1, 1, h, 1).expand(b, 1, h, w)
    xs = torch.linspace(-1, 1, w, device=x.device).view(1, 1, 1, w).expand(b, 1, h, w)
    return torch.cat([x, xs, ys], 1)


class HeatmapNet(nn.Module):
    """``[B, 1, H, W] -> [B, P, H, W]``: one heatmap per point (coordinates: soft-argmax)."""

    def __init__(self, points: int, width: int = 16) -> None:
        super().__init__()
        self.enc1, self.enc2 = conv_block(3, width), conv_block(width + 2, 2 * width)
        self.mid = conv_block(2 * width + 2, 2 * width)
        self.dec2 = conv_block(4 * width, width)
        self.dec1 = conv_block(2 * width, width)
        self.head = nn.Conv2d(width + 2, points, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``[B, P, H, W]`` heatmap logits over the input frame."""
        e1 = self.enc1(_coords(x))  # full resolution
        e2 = self.enc2(_coords(F.max_pool2d(e1, 2)))  # 1/2
        m = self.mid(_coords(F.max_pool2d(e2, 2)))  # 1/4: context, which landmark is which
        d = self.dec2(torch.cat([F.interpolate(m, scale_factor=2.0), e2], 1))
        d = self.dec1(torch.cat([F.interpolate(d, scale_factor=2.0), e1], 1))
        heat: torch.Tensor = self.head(_coords(d))
        return heat


def _centres(n: int, like: torch.Tensor) -> torch.Tensor:
    """Pixel-centre coordinates ``0.5 .. n - 0.5``."""
    return torch.arange(n, device=like.device, dtype=like.dtype) + 0.5


def soft_argmax(heat: torch.Tensor) -> torch.Tensor:
    """``[B, P, H, W]`` logits -> ``[B, P, 2]`` expected ``(x, y)`` (pixel-centre convention)."""
    b, p, h, w = heat.shape
    prob = heat.flatten(2).softmax(-1).view(b, p, h, w)
    px = (prob.sum(2) * _centres(w, prob)).sum(-1)
    py = (prob.sum(3) * _centres(h, prob)).sum(-1)
    return torch.stack([px, py], -1)


def heatmap_loss(heat: torch.Tensor, keypoints: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """Cross-entropy of each visible point's heatmap against a Gaussian at its position."""
    b, p, h, w = heat.shape
    dx = _centres(w, heat).view(1, 1, 1, w) - keypoints[..., 0].view(b, p, 1, 1)
    dy = _centres(h, heat).view(1, 1, h, 1) - keypoints[..., 1].view(b, p, 1, 1)
    target = torch.exp(-(dx**2 + dy**2) / (2 * sigma**2)).flatten(2)
    target = target / target.sum(-1, keepdim=True).clamp(min=1e-12)
    ce = -(target * heat.flatten(2).log_softmax(-1)).sum(-1)  # [B, P]
    visible = (keypoints[..., 2] > 0) & (target.sum(-1) > 0)
    loss: torch.Tensor = (ce * visible).sum() / visible.sum().clamp(min=1)
    return loss


def radial_errors(pred: torch.Tensor, keypoints: torch.Tensor) -> torch.Tensor:
    """Distances in pixels between ``pred [B, P, 2]`` and the visible points of ``[B, P, 3]``."""
    visible = keypoints[..., 2] > 0
    out: torch.Tensor = (pred - keypoints[..., :2]).norm(dim=-1)[visible]
    return out


class LandmarkModule(L.LightningModule):
    """The heatmap net, trained on Gaussian-target heatmaps of visible points; MRE each epoch.

    Args:
        mean_shape: ``[P, 2]`` the trivial predictor's answer (the training set's mean shape).
    """

    def __init__(self, mean_shape: torch.Tensor, lr: float = 3e-3) -> None:
        super().__init__()
        self.net, self.lr = HeatmapNet(POINTS), lr
        self.mean_shape: torch.Tensor
        self.register_buffer("mean_shape", mean_shape)
        self.errors: list[torch.Tensor] = []
        self.trivial: list[torch.Tensor] = []
        self.history: list[tuple[float, float]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """Heatmap cross-entropy over the visible points of the augmented batch."""
        return heatmap_loss(self.net(batch["image"]), batch["keypoints"])

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        """Collect the radial errors of the model and of the mean shape (padding left out)."""
        real = ~batch["is_pad"]
        points = batch["keypoints"][real]
        self.errors.append(radial_errors(soft_argmax(self.net(batch["image"][real])), points).cpu())
        trivial = self.mean_shape.expand(len(points), -1, -1)
        self.trivial.append(radial_errors(trivial, points).cpu())

    def on_validation_epoch_end(self) -> None:
        """Print the held-out mean radial error next to the mean shape's."""
        mre, trivial = torch.cat(self.errors).mean().item(), torch.cat(self.trivial).mean().item()
        self.history.append((mre, trivial))
        print(
            f"epoch {self.current_epoch}: held-out mean radial error {mre:.2f} px "
            f"(mean-shape predictor: {trivial:.2f} px; input {INPUT}x{INPUT})",
            flush=True,
        )
        self.errors.clear()
        self.trivial.clear()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """AdamW."""
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def eval_loader(store: Path, batch_size: int, device: str | torch.device = "cpu") -> StoreLoader:
    """The held-out view of a store: centre crop of the letterboxed extent, store order.

    Every sample: the last batch is padded, its padding marked ``is_pad``.
    """
    augment = EvalAugment(size=(INPUT, INPUT), crop=CenterCrop(1.0))
    return StoreLoader(
        store, batch_size, device=device, shuffle=False, drop_last=False, augment=augment
    )


class LandmarkData(L.LightningDataModule):
    """``StoreLoader`` over the training and held-out keypoints stores."""

    def __init__(self, train: Path, val: Path, batch_size: int, seed: int) -> None:
        super().__init__()
        self.train, self.val, self.batch_size, self.seed = train, val, batch_size, seed

    def train_dataloader(self) -> StoreLoader:
        """Random resized crop (points moved exactly, those cropped out invisible), no flip."""
        crop = RandomResizedCrop(scale=(0.7, 1.0), ratio=(0.8, 1.25))
        augment = TrainAugment(size=(INPUT, INPUT), crop=crop, flip=None)
        return StoreLoader(
            self.train,
            self.batch_size,
            device=trainer_device(self),
            seed=self.seed,
            augment=augment,
        )

    def val_dataloader(self) -> StoreLoader:
        """The centre crop, in store order."""
        return eval_loader(self.val, self.batch_size, trainer_device(self))


def mean_shape(store: Path) -> torch.Tensor:
    """``[P, 2]`` mean of each visible point over a store's eval view."""
    total, count = torch.zeros(POINTS, 2), torch.zeros(POINTS, 1)
    with eval_loader(store, 32) as loader:
        for batch in loader:
            points = batch["keypoints"][~batch["is_pad"]]
            visible = (points[..., 2:] > 0).float()
            total += (points[..., :2] * visible).sum(0)
            count += visible.sum(0)
    return total / count.clamp(min=1)


def landmark_spec() -> BuildSpec:
    """Letterboxed grey images (1 channel) and their keypoints (the count learned)."""
    image = FieldSpec("image", "image", {"channels": 1})
    return BuildSpec(
        size=STORE_SIZE, mode="letterbox", fields=(image, FieldSpec("keypoints", "keypoints", {}))
    )


def main(argv: Sequence[str] | None = None) -> list[tuple[float, float]]:
    """Run the example; return ``(model MRE, mean-shape MRE)`` of every epoch, in pixels."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    args = parser.parse_args(argv)
    n_train, n_val, epochs = (16, 8, 1) if args.quick else (160, 40, 8)
    epochs = args.epochs or epochs
    with work_folder(args.work) as work:
        manifests = [
            make_landmarks(work / name, n, size=96, points=POINTS, seed=args.seed + i)
            for i, (name, n) in enumerate([("train", n_train), ("val", n_val)])
        ]
        spec = landmark_spec()
        jobs = [(str(m), work / f"{m.parent.name}.zarr", spec) for m in manifests]
        train, val = build_stores(jobs)
        torch.manual_seed(args.seed)  # the model's initial weights
        module = LandmarkModule(mean_shape(train))
        data = LandmarkData(train, val, batch_size=8, seed=args.seed)
        trainer(epochs).fit(module, datamodule=data)
    return module.history


if __name__ == "__main__":
    main()
