"""Object detection on a boxes store built from a COCO file: a tiny centre-heatmap detector.

``python -m benchmarks.examples.detection [--quick] [--work DIR] [--epochs N] [--seed S]``:

1. writes synthetic scenes (1 to 3 filled shapes of 3 classes on a noisy background, each a
   red rectangle, a green disc or a blue triangle) with a COCO ``instances.json`` per split
   (:func:`make_shapes`: ``images`` with ``file_name``, ``annotations`` with ``bbox`` ``[x,
   y, w, h]`` and ``category_id``), the images in a folder of their own;
2. builds a letterboxed store of each with ``precompute build instances.json --out S
   --images DIR`` (fields ``image`` + ``boxes``; the boxes are mapped exactly into the stored
   frame);
3. trains a small fully convolutional detector on CPU from ``StoreLoader`` batches (random
   resized crop + flip, the boxes moved with the pixels; ``boxes.count`` says how many rows
   of ``boxes`` are real): per class a centre heatmap at stride 4 (penalty-reduced focal
   loss, as CenterNet), and each centre's box size and sub-cell offset (L1);
4. prints, for the held-out store (centre crop, store order), the mean IoU of each true box
   with the best predicted box of its class, next to the baseline that answers the training
   set's mean box of that class for every image.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch import nn
from torch.nn import functional as F

from benchmarks.examples.stores import add_common_args, conv_block, work_folder
from loaders import StoreLoader
from loaders.augment import EvalAugment, TrainAugment
from loaders.augment.image.ops import CenterCrop, HorizontalFlip, RandomResizedCrop
from precompute.cli import main as precompute

__all__ = ["CLASSES", "CenterNet", "decode", "main", "make_shapes", "mean_iou", "targets"]

CLASSES = ("rectangle", "disc", "triangle")
SIZE, STRIDE, TOP = 64, 4, 6  # stored and input side, heatmap stride, detections per image
COLOURS = ((220, 40, 40), (40, 200, 60), (50, 80, 230))


def _shape(draw: ImageDraw.ImageDraw, cls: int, box: list[int], jitter: int) -> None:
    colour = tuple(min(255, c + jitter) for c in COLOURS[cls])
    x0, y0, x1, y1 = box
    if cls == 0:
        draw.rectangle([x0, y0, x1 - 1, y1 - 1], fill=colour)
    elif cls == 1:
        draw.ellipse([x0, y0, x1 - 1, y1 - 1], fill=colour)
    else:
        draw.polygon([(x0, y1 - 1), ((x0 + x1 - 1) / 2, y0), (x1 - 1, y1 - 1)], fill=colour)


def make_shapes(root: Path, n: int, seed: int) -> Path:
    """Write ``n`` scenes to ``root/images/`` and ``root/instances.json``; return the file."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    for i in range(n):
        rng = np.random.default_rng([seed, 5, i])
        w, h = int(rng.integers(64, 97)), int(rng.integers(64, 97))  # letterboxed to 64
        noise = rng.normal(70, 18, (h, w, 3)).clip(0, 255).astype(np.uint8)
        img = Image.fromarray(noise)
        draw = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(1, 4))):
            bw, bh = int(rng.integers(14, 34)), int(rng.integers(14, 34))
            x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
            cls = int(rng.integers(0, len(CLASSES)))
            _shape(draw, cls, [x0, y0, x0 + bw, y0 + bh], int(rng.integers(0, 30)))
            ann = {"id": len(anns) + 1, "image_id": i, "category_id": cls + 1, "iscrowd": 0}
            anns.append({**ann, "bbox": [x0, y0, bw, bh], "area": bw * bh})
        name = f"scene_{i:04d}.png"
        img.save(root / "images" / name)
        images.append({"id": i, "file_name": name, "width": w, "height": h})
    categories = [{"id": c + 1, "name": name} for c, name in enumerate(CLASSES)]
    doc = {"images": images, "annotations": anns, "categories": categories}
    path = root / "instances.json"
    path.write_text(json.dumps(doc))
    return path


class CenterNet(nn.Module):
    """``[B, 3, H, W] -> [B, C + 4, H / 4, W / 4]``: heatmap logits, box size, centre offset."""

    def __init__(self, classes: int, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            conv_block(width, 2 * width), nn.MaxPool2d(2),
            conv_block(2 * width, 2 * width),
        )  # fmt: skip
        self.head = nn.Conv2d(2 * width, classes + 4, 1)
        bias = torch.zeros(classes + 4)
        bias[:classes] = -2.2  # the heatmaps start near the background rate (CenterNet)
        self.head.bias = nn.Parameter(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Raw head outputs at stride 4."""
        out: torch.Tensor = self.head(self.body(x))
        return out


def targets(
    boxes: torch.Tensor, count: torch.Tensor, classes: int, cells: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Heatmap ``[B, C, n, n]``, regression ``[B, 4, n, n]`` and its mask ``[B, n, n]``.

    Each real box (the first ``count`` rows) puts a Gaussian (sigma a sixth of its size in
    cells) on its class at its centre cell; that cell regresses the box's width and height
    (in cells) and the centre's offset inside the cell.
    """
    b, m = boxes.shape[:2]
    real = torch.arange(m)[None] < count[:, None].long()
    centre = (boxes[..., :2] + boxes[..., 2:4]) / (2 * STRIDE)  # [B, M, 2] in cells
    size = (boxes[..., 2:4] - boxes[..., :2]) / STRIDE
    grid = torch.arange(cells, dtype=torch.float32) + 0.5
    cell = centre.floor().clamp(0, cells - 1)
    sigma = (size.mean(-1) / 6).clamp(min=0.5)[..., None, None]
    dx = grid[None, None, None, :] - (cell[..., 0:1, None] + 0.5)
    dy = grid[None, None, :, None] - (cell[..., 1:2, None] + 0.5)
    blob = torch.exp(-(dx**2 + dy**2) / (2 * sigma**2)) * real[..., None, None]  # [B, M, n, n]
    onehot = F.one_hot(boxes[..., 4].clamp(min=0).long(), classes).float() * real[..., None]
    heat = torch.einsum("bmc,bmyx->bmcyx", onehot, blob).amax(1)
    reg, mask = torch.zeros(b, 4, cells, cells), torch.zeros(b, cells, cells)
    at = real.nonzero()
    ys, xs = cell[at[:, 0], at[:, 1], 1].long(), cell[at[:, 0], at[:, 1], 0].long()
    value = torch.cat([size, centre - cell], -1)[at[:, 0], at[:, 1]]
    reg[at[:, 0], :, ys, xs] = value
    mask[at[:, 0], ys, xs] = 1.0
    return heat, reg, mask


def loss_of(
    out: torch.Tensor, heat: torch.Tensor, reg: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """CenterNet's penalty-reduced focal loss on the heatmaps plus L1 at the centres."""
    c = heat.shape[1]
    p = out[:, :c].sigmoid().clamp(1e-4, 1 - 1e-4)
    peak = heat.eq(1).float()
    focal = -(peak * (1 - p) ** 2 * p.log() + (1 - peak) * (1 - heat) ** 4 * p**2 * (1 - p).log())
    n = peak.sum().clamp(min=1)
    l1 = (F.l1_loss(out[:, c:], reg, reduction="none").sum(1) * mask).sum() / mask.sum().clamp(1)
    total: torch.Tensor = focal.sum() / n + 0.1 * l1
    return total


def decode(out: torch.Tensor, classes: int, top: int = TOP) -> torch.Tensor:
    """``[B, top, 6]`` detections ``[x0, y0, x1, y1, class, score]`` in input pixels."""
    n = out.shape[-1]
    heat = out[:, :classes].sigmoid()
    peaks = heat * (F.max_pool2d(heat, 3, 1, 1) == heat)
    score, index = peaks.flatten(1).topk(top)
    cls, cell = index // (n * n), index % (n * n)
    ys, xs = cell // n, cell % n
    reg = out[:, classes:].flatten(2).gather(2, cell[:, None].expand(-1, 4, -1))  # [B, 4, top]
    cx, cy = (xs + reg[:, 2]) * STRIDE, (ys + reg[:, 3]) * STRIDE
    w, h = reg[:, 0].clamp(min=0) * STRIDE, reg[:, 1].clamp(min=0) * STRIDE
    boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
    return torch.cat([boxes, cls[..., None].float(), score[..., None]], -1)


def _iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU of ``[..., 4]`` boxes ``a`` against ``[..., K, 4]`` boxes ``b`` -> ``[..., K]``."""
    lo, hi = (
        torch.maximum(a[..., None, :2], b[..., :2]),
        torch.minimum(a[..., None, 2:], b[..., 2:]),
    )
    inter = (hi - lo).clamp(min=0).prod(-1)
    area = (a[..., 2:] - a[..., :2]).prod(-1)[..., None] + (b[..., 2:] - b[..., :2]).prod(-1)
    return inter / (area - inter).clamp(min=1e-9)


def mean_iou(truth: torch.Tensor, count: torch.Tensor, found: torch.Tensor) -> list[float]:
    """Per real box: the IoU of the best detection of its class (0 if none)."""
    out = []
    for b in range(truth.shape[0]):
        for box in truth[b, : int(count[b])]:
            same = found[b][found[b][:, 4] == box[4]]
            out.append(float(_iou(box[:4], same[:, :4]).max()) if len(same) else 0.0)
    return out


def _loader(store: Path, train: bool, seed: int) -> StoreLoader:
    if train:
        crop = RandomResizedCrop(scale=(0.6, 1.0), ratio=(0.8, 1.25))
        augment = TrainAugment(size=(SIZE, SIZE), crop=crop, flip=HorizontalFlip(), jitter=None)
        return StoreLoader(store, 16, seed=seed, augment=augment, prefetch=0)
    augment_eval = EvalAugment(size=(SIZE, SIZE), crop=CenterCrop(1.0))
    return StoreLoader(store, 32, shuffle=False, drop_last=False, augment=augment_eval, prefetch=0)


def mean_boxes(store: Path) -> torch.Tensor:
    """``[C, 4]``: the training set's mean box of each class (the baseline's answer)."""
    total, n = torch.zeros(len(CLASSES), 4), torch.zeros(len(CLASSES), 1)
    with _loader(store, False, 0) as loader:
        for batch in loader:
            for b in (~batch["is_pad"]).nonzero().flatten():
                for box in batch["boxes"][b, : int(batch["boxes.count"][b])]:
                    total[int(box[4])] += box[:4]
                    n[int(box[4])] += 1
    return total / n.clamp(min=1)


def evaluate(model: nn.Module, store: Path, means: torch.Tensor) -> tuple[float, float]:
    """Mean IoU of the model's detections and of the mean-box baseline on ``store``."""
    model.eval()
    ours, base = [], []
    baseline = torch.cat([means, torch.arange(len(CLASSES), dtype=torch.float32)[:, None]], -1)
    with torch.no_grad(), _loader(store, False, 0) as loader:
        for batch in loader:
            real = ~batch["is_pad"]
            truth, count = batch["boxes"][real], batch["boxes.count"][real]
            found = decode(model(batch["image"][real]), len(CLASSES))
            ours += mean_iou(truth, count, found)
            base += mean_iou(truth, count, baseline.expand(len(truth), -1, -1))
    model.train()
    return float(np.mean(ours)), float(np.mean(base))


def train(train_store: Path, val_store: Path, epochs: int, seed: int) -> list[tuple[float, float]]:
    """Train the detector; return ``(model mean IoU, baseline mean IoU)`` after each epoch."""
    torch.manual_seed(seed)
    model = CenterNet(len(CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3)
    means = mean_boxes(train_store)
    history = []
    loader = _loader(train_store, True, seed)
    for epoch in range(epochs):
        for batch in loader:
            heat, reg, mask = targets(
                batch["boxes"], batch["boxes.count"], len(CLASSES), SIZE // STRIDE
            )
            loss = loss_of(model(batch["image"]), heat, reg, mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
        history.append(evaluate(model, val_store, means))
        print(
            f"epoch {epoch}: train loss {loss.item():.3f}, held-out mean IoU "
            f"{history[-1][0]:.3f} (mean-box baseline {history[-1][1]:.3f})",
            flush=True,
        )
    loader.close()
    return history


def build(coco: Path, out: Path) -> Path:
    """``precompute build instances.json --out OUT --images DIR`` (letterbox, no Ray)."""
    precompute(["build", str(coco), "--out", str(out), "--images", str(coco.parent / "images"),
                "--size", str(SIZE), "--mode", "letterbox", "--runner", "sequential",
                "--content-hash", "--quiet"])  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> list[tuple[float, float]]:
    """Run the example; return ``(model, baseline)`` mean IoU after each epoch."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    args = parser.parse_args(argv)
    n_train, n_val, epochs = (96, 32, 4) if args.quick else (320, 64, 10)
    with work_folder(args.work) as work:
        train_store, val_store = (
            build(make_shapes(work / name, n, args.seed + i), work / f"{name}.zarr")
            for i, (name, n) in enumerate([("train", n_train), ("val", n_val)])
        )
        return train(train_store, val_store, args.epochs or epochs, args.seed)


if __name__ == "__main__":
    main()
