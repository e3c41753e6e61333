"""Generated datasets with named fields, and the classic per-item baselines that read them.

- :func:`make_segmentation` writes ``ROOT/images/<name>.png`` (RGB) and ``ROOT/masks/<name>.png``
  (palette ``P`` masks of class ids 0..3): each image shows a few filled shapes whose class is
  its shape (background 0, ellipse 1, rectangle 2, triangle 3), with class-tinted colours and
  noise, and the mask is the exact label of every pixel, so a small model can learn it.
- :func:`make_landmarks` writes grey "X-ray" images with ``points`` bright blobs and a
  ``landmarks.csv`` manifest (``image,keypoints``; keypoints in pixels, pixel-centre
  convention), the positions jittered around a fixed template like cephalometric points.
- :class:`PillowPairs` is the classic path for segmentation: a ``Dataset`` that decodes the
  PNG pair with Pillow per item and applies a paired random resized crop + flip (image
  bilinear, mask nearest), then normalises, for a ``DataLoader`` with worker processes.

Everything is a pure function of its arguments (same seed, same bytes).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from benchmarks.harness.workloads.crops import random_resized_crop_box
from precompute.policy import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["SEG_CLASSES", "PillowPairs", "make_landmarks", "make_segmentation"]

SEG_CLASSES = 4  # background, ellipse, rectangle, triangle
_PALETTE = [0, 0, 0, 230, 25, 75, 60, 180, 75, 0, 130, 200] + [0] * (256 - 4) * 3
MEAN = np.array(IMAGENET_MEAN, np.float32) * 255
STD = np.array(IMAGENET_STD, np.float32) * 255


def _shape(draw: ImageDraw.ImageDraw, cls: int, box: tuple[float, ...], fill: object) -> None:
    x0, y0, x1, y1 = box
    if cls == 1:
        draw.ellipse(box, fill=fill)  # type: ignore[arg-type]
    elif cls == 2:
        draw.rectangle(box, fill=fill)  # type: ignore[arg-type]
    else:
        draw.polygon([((x0 + x1) / 2, y0), (x0, y1), (x1, y1)], fill=fill)  # type: ignore[arg-type]


def _segmentation_pair(rng: np.random.Generator, h: int, w: int) -> tuple[Image.Image, Image.Image]:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = rng.uniform(40, 120, 3)
    background = base + 40 * np.stack([xx / w, yy / h, (xx + yy) / (w + h)], -1)
    image = Image.fromarray(background.clip(0, 255).astype(np.uint8), "RGB")
    mask = Image.new("P", (w, h), 0)
    mask.putpalette(_PALETTE)
    draw_i, draw_m = ImageDraw.Draw(image), ImageDraw.Draw(mask)
    for _ in range(int(rng.integers(1, 4))):
        cls = int(rng.integers(1, SEG_CLASSES))
        r = rng.uniform(0.12, 0.3) * min(w, h)
        cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
        box = (cx - r, cy - r, cx + r, cy + r)
        tint = np.array(_PALETTE[3 * cls : 3 * cls + 3]) * 0.7 + rng.uniform(0, 70, 3)
        _shape(draw_i, cls, box, tuple(int(c) for c in tint))
        _shape(draw_m, cls, box, cls)
    noisy = np.asarray(image, np.int16) + rng.integers(-12, 13, (h, w, 3))
    return Image.fromarray(noisy.clip(0, 255).astype(np.uint8), "RGB"), mask


def make_segmentation(
    root: str | Path, n: int, size: int | tuple[int, int] = 160, seed: int = 0
) -> Path:
    """Write ``n`` image/mask PNG pairs under ``root`` (``images/`` + ``masks/``); return root.

    ``size``: one side, or a ``(low, high)`` range of sides drawn per image (mixed sizes).
    """
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    lo, hi = (size, size) if isinstance(size, int) else size
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        h, w = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
        image, mask = _segmentation_pair(rng, h, w)
        image.save(root / "images" / f"case_{i:05d}.png")
        mask.save(root / "masks" / f"case_{i:05d}.png")
    return root


# A 19-point template in [0, 1]^2, roughly where cephalometric landmarks sit on a lateral skull.
_TEMPLATE = np.array(
    [
        [0.30, 0.25], [0.45, 0.20], [0.60, 0.22], [0.72, 0.30], [0.80, 0.42],
        [0.78, 0.55], [0.70, 0.66], [0.62, 0.75], [0.52, 0.82], [0.42, 0.78],
        [0.35, 0.68], [0.30, 0.55], [0.28, 0.42], [0.50, 0.40], [0.58, 0.50],
        [0.50, 0.60], [0.40, 0.50], [0.65, 0.85], [0.45, 0.90],
    ],
    dtype=np.float64,
)  # fmt: skip


def make_landmarks(
    root: str | Path, n: int, size: int = 192, points: int = 19, seed: int = 0
) -> Path:
    """Write ``n`` grey images with ``points`` landmarks and ``ROOT/landmarks.csv``; return it.

    Each landmark is a bright blob centred on the pixel-centre coordinate written in the
    manifest (``[[x, y], ...]`` in pixels of the written image).
    """
    if not 1 <= points <= len(_TEMPLATE):
        raise ValueError(f"points must be in [1, {len(_TEMPLATE)}], got {points}")
    root = Path(root)
    (root / "xrays").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, 7, i])
        h, w = size + int(rng.integers(0, size // 4)), size
        pts = (_TEMPLATE[:points] + rng.normal(0, 0.02, (points, 2))) * [w, h]
        pts = pts.clip([2, 2], [w - 3, h - 3])
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) + 0.5  # pixel centres
        img = 40 + 30 * np.exp(
            -(((xx - w / 2) / (0.4 * w)) ** 2 + ((yy - h / 2) / (0.45 * h)) ** 2)
        )
        for x, y in pts:
            img += 150 * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * 2.0**2))
        img += rng.normal(0, 6, img.shape)
        name = f"xrays/ceph_{i:05d}.png"
        Image.fromarray(img.clip(0, 255).astype(np.uint8), "L").save(root / name)
        rows.append((name, json.dumps([[round(x, 3), round(y, 3)] for x, y in pts])))
    manifest = root / "landmarks.csv"
    with open(manifest, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["image", "keypoints"])
        out.writerows(rows)
    return manifest


class PillowPairs(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Classic segmentation input: Pillow decode of an image/mask pair, paired crop + flip."""

    def __init__(self, root: str | Path, size: int) -> None:
        root = Path(root)
        self.images = sorted((root / "images").glob("*.png"))
        self.masks = [root / "masks" / p.name for p in self.images]
        self.size = size

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng()
        with Image.open(self.images[i]) as im, Image.open(self.masks[i]) as mk:
            image, mask = im.convert("RGB"), mk.copy()
        box = random_resized_crop_box(rng, *image.size)
        out = (self.size, self.size)
        image = image.resize(out, Image.Resampling.BILINEAR, box=box)
        mask = mask.resize(out, Image.Resampling.NEAREST, box=box)
        if rng.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            mask = mask.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        x = (np.asarray(image, np.float32) - MEAN) / STD
        y = np.asarray(mask, np.int64)
        return torch.from_numpy(x.transpose(2, 0, 1).copy()), torch.from_numpy(y.copy())
