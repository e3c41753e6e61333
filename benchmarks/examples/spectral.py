"""Spectral patch classification on a synthetic scene, from the store (README "Spectral cubes").

``python -m benchmarks.examples.spectral [--work DIR] [--epochs N]``: writes a synthetic
hyperspectral scene and its ground truth (:func:`benchmarks.spectral_data.make_scene`), builds
two stores of ``P x P`` patches with the same block split (``--split train`` and ``--split
test``: spatially disjoint, with a guard band), trains a small convolutional classifier on
CPU from :class:`~loaders.torch_loader.StoreLoader` batches (crop/flip/rotate-90, per-band
normalisation from the store's statistics), and prints the training loss per epoch and the
overall accuracy on the test store. Nothing here is hard-coded: the figures are measured.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchmarks.spectral_data import make_scene
from loaders.augment import CenterCrop, EvalAugment, RandomResizedCrop, TrainAugment
from loaders.torch_loader import StoreLoader
from precompute.cli import main as precompute

__all__ = ["build_stores", "main", "train"]

PATCH, CLASSES, BANDS = 9, 6, 32


def build_stores(work: Path) -> tuple[Path, Path]:
    """Write the scene and build its train and test patch stores (one block split)."""
    scene, gt = make_scene(72, 72, BANDS, CLASSES, seed=3, noise=0.3)
    np.save(work / "scene.npy", scene)
    np.save(work / "gt.npy", gt)
    common = ["--labels", "gt.npy", "--patch", str(PATCH), "--split-block", "12",
              "--test-fraction", "0.25", "--split-guard", str(PATCH // 2), "--content-hash",
              "--quiet"]  # fmt: skip
    for side in ("train", "test"):
        precompute(["build", str(work / "scene.npy"), "--out", str(work / side), *common,
                    "--split", side])  # fmt: skip
    return work / "train", work / "test"


def _model(bands: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(bands, 48, 3, padding=1), nn.BatchNorm2d(48), nn.ReLU(),
        nn.Conv2d(48, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes),
    )  # fmt: skip


def train(train_store: Path, test_store: Path, epochs: int) -> tuple[list[float], float]:
    """Train from ``train_store``; return the mean loss per epoch and the test accuracy."""
    torch.manual_seed(0)
    aug = TrainAugment(size=(PATCH, PATCH), crop=RandomResizedCrop(scale=(0.7, 1.0)), rot90=True)
    loader = StoreLoader(train_store, 32, seed=0, augment=aug, device="cpu")
    model = _model(BANDS, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        total, count = 0.0, 0
        for batch in loader:
            keep = ~batch["is_pad"]
            loss = nn.functional.cross_entropy(model(batch["image"][keep]), batch["label"][keep])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, count = total + float(loss.detach()) * int(keep.sum()), count + int(keep.sum())
        losses.append(total / count)
    evaluate = EvalAugment(size=(PATCH, PATCH), crop=CenterCrop(fraction=1.0))
    test = StoreLoader(test_store, 64, shuffle=False, augment=evaluate, drop_last=False)
    model.eval()
    right = seen = 0
    with torch.no_grad():
        for batch in test:
            keep = ~batch["is_pad"]
            pred = model(batch["image"][keep]).argmax(1)
            right += int((pred == batch["label"][keep]).sum())
            seen += int(keep.sum())
    return losses, right / seen


def main(argv: list[str] | None = None) -> None:
    """Build the stores, train, print the losses and the test overall accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="Folder for the scene and stores (default: a temp dir).")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nostall-spectral-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        train_store, test_store = build_stores(work)
        losses, accuracy = train(train_store, test_store, args.epochs)
    for epoch, loss in enumerate(losses):
        print(f"epoch {epoch}: train loss {loss:.4f}")
    print(f"test overall accuracy {accuracy:.3f} (chance {1 / CLASSES:.3f}, {CLASSES} classes)")


if __name__ == "__main__":
    main()
