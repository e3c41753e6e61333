"""Setup for :mod:`benchmarks.bench_loader`: stores, the classic Pillow dataset, metrics.

Everything here runs outside the timed parts.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchmarks.harness.strategy_workers import random_resized_crop_box
from precompute.policy import IMAGENET_MEAN, IMAGENET_STD
from precompute.spec import BuildSpec
from precompute.writer import write_store_from_arrays

__all__ = [
    "PillowJpegDataset",
    "class_entropy",
    "decoded_store",
    "environment_line",
    "random_store",
]

MEAN = np.array(IMAGENET_MEAN, np.float32) * 255
STD = np.array(IMAGENET_STD, np.float32) * 255


def environment_line() -> str:
    """Return a one-line description of the machine and versions."""
    try:
        from benchmarks.environment import environment

        env = environment()
        keep: dict[str, Any] = {k: env[k] for k in ("cpu", "cores", "memory_gib") if k in env}
        keep["cuda"] = torch.cuda.is_available()
        return " ".join(f"{k}={v}" for k, v in keep.items()) or str(env)
    except Exception:  # the shared harness is optional here; fall back to the basics
        return f"{platform.processor() or platform.machine()} torch={torch.__version__}"


def _spec(size: int) -> BuildSpec:
    return BuildSpec(size=size, chunk_samples=32, shard_samples=256)


def random_store(root: Path, n: int, size: int, npy: bool = True) -> tuple[Path, Path | None]:
    """Write a store of ``n`` random images (and the same bytes as ``.npy`` for memmap)."""
    images = np.random.default_rng(0).integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    store = root / "store"
    write_store_from_arrays(store, images, np.arange(n) % 10, _spec(size))
    if not npy:
        return store, None
    np.save(root / "images.npy", images)
    return store, root / "images.npy"


class PillowJpegDataset(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """The classic path: decode with Pillow, random resized crop, flip, normalise, CHW float."""

    def __init__(self, files: list[Path], labels: list[int], size: int) -> None:
        self.files, self.labels, self.size = files, labels, size

    @classmethod
    def sample(cls, root: Path, n: int, size: int) -> PillowJpegDataset:
        """Generate ``n`` sample photos with :mod:`precompute.sample` and wrap them."""
        from precompute.sample import make_sample_dataset

        make_sample_dataset(root, n, num_classes=10)
        files = sorted(p for p in root.rglob("*") if p.suffix in (".jpg", ".png"))
        classes = sorted({p.parent.name for p in files})
        return cls(files, [classes.index(p.parent.name) for p in files], size)

    def __len__(self) -> int:
        return len(self.files)

    def decode(self, i: int) -> Image.Image:
        """Return image ``i`` as RGB."""
        with Image.open(self.files[i]) as img:
            return img.convert("RGB")

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng()
        img = self.decode(i)
        box = random_resized_crop_box(rng, *img.size)
        img = img.resize((self.size, self.size), Image.Resampling.BILINEAR, box=box)
        if rng.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        x = (np.asarray(img, np.float32) - MEAN) / STD
        return torch.from_numpy(x.transpose(2, 0, 1).copy()), self.labels[i]


def decoded_store(root: Path, data: PillowJpegDataset, size: int) -> Path:
    """Decode ``data`` once (short side to ``size``, centre crop) into a store."""
    images = np.empty((len(data), size, size, 3), np.uint8)
    for i in range(len(data)):
        img = data.decode(i)
        scale = size / min(img.size)
        w, h = max(size, round(img.width * scale)), max(size, round(img.height * scale))
        img = img.resize((w, h), Image.Resampling.BILINEAR)
        left, top = (w - size) // 2, (h - size) // 2
        images[i] = np.asarray(img.crop((left, top, left + size, top + size)))
    write_store_from_arrays(root, images, np.asarray(data.labels), _spec(size))
    return root


def class_entropy(labels: np.ndarray, batch: int, classes: int) -> float:
    """Return the mean Shannon entropy (bits) of the class histogram of each full batch."""
    n = len(labels) // batch * batch
    hist = np.stack([np.bincount(b, minlength=classes) for b in labels[:n].reshape(-1, batch)])
    p = hist / batch
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log2(p), 0.0).sum(1)
    return float(ent.mean())
