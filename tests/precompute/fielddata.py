"""Tiny real datasets with fields: segmentation folders and manifests of keypoints and tags."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from precompute.sample import make_image

CLASSES = 4
PALETTE = [0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255] + [7] * (256 * 3 - 12)
COLORMAP = [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]]


def size_of(i: int, seed: int = 0) -> tuple[int, int]:
    """``(w, h)`` of sample ``i``: 20-60 px, not square."""
    rng = np.random.default_rng([seed, i, 7])
    return int(rng.integers(20, 61)), int(rng.integers(20, 61))


def mask_ids(i: int, size: tuple[int, int], classes: int = CLASSES) -> np.ndarray:
    """An ``(h, w)`` mask of class ids: vertical bands, so nearest resizing is easy to see."""
    w, h = size
    rng = np.random.default_rng([i, 11])
    cols = (np.arange(w) * classes // w + int(rng.integers(0, classes))) % classes
    return np.broadcast_to(cols, (h, w)).astype(np.uint8).copy()


def save(path: Path, img: Image.Image) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    img.save(
        buf,
        "JPEG" if path.suffix == ".jpg" else "PNG",
        **({"quality": 92} if path.suffix == ".jpg" else {}),
    )
    path.write_bytes(buf.getvalue())
    return path


def palette_mask(ids: np.ndarray) -> Image.Image:
    img = Image.fromarray(ids.astype(np.uint8), "P")
    img.putpalette(PALETTE)
    return img


def rgb_mask(ids: np.ndarray) -> Image.Image:
    return Image.fromarray(np.asarray(COLORMAP, dtype=np.uint8)[ids], "RGB")


def make_segmentation(root: Path, n: int = 24, rgb: bool = False) -> Path:
    """``root/images/NNN.{png,jpg}`` + ``root/masks/NNN.png`` (palette, or RGB colours)."""
    for i in range(n):
        size = size_of(i)
        ext = ".jpg" if i % 2 else ".png"
        save(root / "images" / f"{i:03d}{ext}", make_image(0, i, i % CLASSES, size))
        ids = mask_ids(i, size)
        save(root / "masks" / f"{i:03d}.png", rgb_mask(ids) if rgb else palette_mask(ids))
    return root


def points_of(i: int, size: tuple[int, int], count: int = 5) -> list[list[float]]:
    """``count`` keypoints inside the image (x, y, v) with v in {1, 2}, one at v 0."""
    rng = np.random.default_rng([i, 13])
    w, h = size
    pts = [
        [float(rng.uniform(0, w)), float(rng.uniform(0, h)), float(rng.integers(1, 3))]
        for _ in range(count)
    ]
    pts[-1][2] = 0.0
    return pts


def make_keypoints_manifest(root: Path, n: int = 20, count: int = 5) -> Path:
    """Images and ``root/points.jsonl`` with columns image, keypoints, label (class names)."""
    lines = []
    for i in range(n):
        size = size_of(i, seed=1)
        path = save(root / "img" / f"{i:03d}.png", make_image(1, i, i % 3, size))
        doc = {
            "image": path.relative_to(root).as_posix(),
            "keypoints": points_of(i, size, count),
            "label": ["cat", "dog", "eel"][i % 3],
        }
        lines.append(json.dumps(doc))
    (root / "points.jsonl").write_text("\n".join(lines) + "\n")
    return root / "points.jsonl"


def make_labels_manifest(root: Path, n: int = 16) -> Path:
    """Images and ``root/tags.csv`` with columns image, labels (JSON lists of indices 0..4)."""
    rows = ["image,labels"]
    for i in range(n):
        path = save(root / "img" / f"{i:03d}.jpg", make_image(2, i, i % 4, size_of(i, 2)))
        tags = sorted({i % 5, (i * 3) % 5}) if i % 4 else []
        rows.append(f'{path.relative_to(root).as_posix()},"{json.dumps(tags)}"')
    (root / "tags.csv").write_text("\n".join(rows) + "\n")
    return root / "tags.csv"
