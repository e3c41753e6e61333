"""Tiny real detection datasets: PNG/JPEG images whose pixels draw their boxes, COCO files.

Every image is black with its boxes filled white (one box per image unless asked), so the
pixels of any stored or loaded image say where its boxes are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tests.precompute.fielddata import save

CATEGORIES = [{"id": 3, "name": "cat"}, {"id": 7, "name": "dog"}, {"id": 11, "name": "eel"}]


def boxes_of(i: int, w: int, h: int, n: int = 1) -> list[list[float]]:
    """``n`` boxes ``[x0, y0, x1, y1, class]`` of image ``i``, whole pixels, inside ``w x h``."""
    rng = np.random.default_rng([i, 31])
    out = []
    for j in range(n):
        bw, bh = int(rng.integers(w // 5, w // 2)), int(rng.integers(h // 5, h // 2))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        out.append([x0, y0, x0 + bw, y0 + bh, (i + j) % len(CATEGORIES)])
    return out


def draw(path: Path, w: int, h: int, boxes: list[list[float]]) -> Path:
    """Save a black ``w x h`` RGB image with each box's pixels white (PNG or JPEG by suffix)."""
    pixels = np.zeros((h, w, 3), dtype=np.uint8)
    for x0, y0, x1, y1, _ in boxes:
        pixels[int(y0) : int(y1), int(x0) : int(x1)] = 255
    return save(path, Image.fromarray(pixels))


def frame_of(i: int) -> tuple[int, int]:
    """``(w, h)`` of image ``i``: landscape, portrait and square frames in turn."""
    return [(60, 36), (36, 60), (48, 48), (75, 40)][i % 4]


def coco_doc(names: list[str], frames: list[tuple[int, int]], boxes: list[list[list[float]]]):
    """A COCO ``instances`` object of these images and boxes (classes as ``CATEGORIES``)."""
    images, anns = [], []
    for i, (name, (w, h)) in enumerate(zip(names, frames, strict=True)):
        images.append({"id": 100 + i, "file_name": name, "width": w, "height": h})
        for x0, y0, x1, y1, c in boxes[i]:
            anns.append(
                {
                    "id": 1000 + len(anns),
                    "image_id": 100 + i,
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "category_id": CATEGORIES[int(c)]["id"],
                    "iscrowd": 0,
                    "area": (x1 - x0) * (y1 - y0),
                }
            )
    return {"images": images, "annotations": anns, "categories": CATEGORIES}


def make_coco(
    root: Path, n: int = 8, per_image: int = 1, images: Path | None = None, empty: int = 0
) -> tuple[Path, dict[str, Any]]:
    """``root/instances.json`` over ``n`` drawn images (``images/`` beside it, or ``images``).

    The last ``empty`` images have no annotation. Returns the file and its object.
    """
    folder = images if images is not None else root / "images"
    names, frames, boxes = [], [], []
    for i in range(n):
        w, h = frame_of(i)
        rows = boxes_of(i, w, h, per_image) if i < n - empty else []
        name = f"{i:03d}.{'jpg' if i % 2 else 'png'}"
        draw(folder / name, w, h, rows)
        names.append(name if images is not None else f"images/{name}")
        frames.append((w, h))
        boxes.append(rows)
    doc = coco_doc(names, frames, boxes)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "instances.json"
    path.write_text(json.dumps(doc))
    return path, doc
