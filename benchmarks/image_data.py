"""Image data of the loader benchmarks and the references read over the same bytes.

Synthetic stores (random pixels, or decoded JPEGs), the classic Pillow path, the numpy memmap
and zarr-python readers that :mod:`benchmarks.suite.loader` compares the loader with, and the
class entropy of batches (shuffle quality). The set-up runs outside the timed parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchmarks.harness.workloads.crops import random_resized_crop_box
from loaders.batching.plan import epoch_plan
from precompute.pipeline.writer import write_store_from_arrays
from precompute.policy import IMAGENET_MEAN, IMAGENET_STD
from precompute.spec import BuildSpec

__all__ = [
    "PillowJpegDataset",
    "class_entropy",
    "decoded_store",
    "memmap_chunks_epoch",
    "memmap_contiguous_epoch",
    "memmap_gather_epoch",
    "random_store",
    "shuffle_entropies",
    "zarr_epoch",
]

MEAN = np.array(IMAGENET_MEAN, np.float32) * 255
STD = np.array(IMAGENET_STD, np.float32) * 255


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


def memmap_gather_epoch(mm: np.ndarray, order: np.ndarray, batch: int) -> int:
    """Gather the samples of ``order`` out of the memmap batch by batch (one copy per sample)."""
    for lo in range(0, len(order) - batch + 1, batch):
        out = np.empty((batch, *mm.shape[1:]), mm.dtype)
        np.take(mm, order[lo : lo + batch], axis=0, out=out, mode="clip")
        torch.from_numpy(out)
    return len(order) // batch * batch


def memmap_contiguous_epoch(mm: np.ndarray, batch: int) -> int:
    """Copy contiguous batches of the memmap in file order: one sequential copy per batch."""
    n = len(mm) // batch * batch
    for lo in range(0, n, batch):
        out = np.empty((batch, *mm.shape[1:]), mm.dtype)
        np.copyto(out, mm[lo : lo + batch])
        torch.from_numpy(out)
    return n


def memmap_chunks_epoch(
    mm: np.ndarray, order: np.ndarray, chunk: int, batch: int, windows: Any
) -> int:
    """Copy each window's chunks out of the memmap, then gather batches from them (2 copies)."""
    pending: list[np.ndarray] = []
    for w in windows:
        chunks = np.asarray(w.chunks)
        buf = np.concatenate([mm[c * chunk : (c + 1) * chunk] for c in chunks.tolist()])
        idx = order[w.start : w.stop]
        sorter = np.argsort(chunks)
        slot = sorter[np.searchsorted(chunks, idx // chunk, sorter=sorter)]
        pending.append(np.take(buf, slot * chunk + idx % chunk, axis=0))
    out = np.concatenate(pending)  # (a real loader would cut batches across windows)
    for lo in range(0, len(out) - batch + 1, batch):
        torch.from_numpy(out[lo : lo + batch])
    return len(order) // batch * batch


def zarr_epoch(path: Path, order: np.ndarray, chunk: int, batch: int, windows: Any) -> int:
    """Read each window's whole chunks with zarr-python, then gather its samples."""
    import zarr

    arr: Any = zarr.open_array(path / "image", mode="r")
    for w in windows:
        rows = {int(c): arr[c * chunk : (c + 1) * chunk] for c in w.chunks}
        idx = order[w.start : w.stop]
        np.stack([rows[int(i) // chunk][int(i) % chunk] for i in idx])
    return len(order) // batch * batch


def class_entropy(labels: np.ndarray, batch: int, classes: int) -> float:
    """Return the mean Shannon entropy (bits) of the class histogram of each full batch."""
    n = len(labels) // batch * batch
    hist = np.stack([np.bincount(b, minlength=classes) for b in labels[:n].reshape(-1, batch)])
    p = hist / batch
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log2(p), 0.0).sum(1)
    return float(ent.mean())


def shuffle_entropies(batch: int) -> list[tuple[str, float]]:
    """Mean class entropy per batch: random, store order, StoreLoader's shuffle windows."""
    n, classes, chunk = 20_000, 10, 32
    labels = np.arange(n) * classes // n  # class-sorted: the worst case for chunk reading
    rng = np.random.default_rng(0)
    rows = [
        ("full random permutation", class_entropy(labels[rng.permutation(n)], batch, classes)),
        ("no shuffle (store order)", class_entropy(labels, batch, classes)),
    ]
    for buffer_chunks in (1, 4, 8, 16):
        order = epoch_plan(
            n,
            chunk,
            seed=0,
            epoch=0,
            rank=0,
            world_size=1,
            shuffle=True,
            buffer_chunks=buffer_chunks,
            valid=None,
        ).order
        rows.append(
            (
                f"StoreLoader buffer_chunks={buffer_chunks}",
                class_entropy(labels[order], batch, classes),
            )
        )
    order = epoch_plan(
        n, chunk, seed=0, epoch=0, rank=0, world_size=1, shuffle=True, buffer_chunks=8, valid=None
    ).order
    built = labels[rng.permutation(n)]  # precompute stores samples in a seeded permutation
    rows.append(
        (
            "StoreLoader buffer_chunks=8, built store",
            class_entropy(built[order], batch, classes),
        )
    )
    return rows
