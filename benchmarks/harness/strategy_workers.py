"""The classic baseline: torch DataLoader workers decoding JPEG/PNG with Pillow.

Each worker decodes a file with Pillow, draws a random resized crop (torchvision's algorithm,
written with Pillow + numpy; torchvision is not a dependency), flips, normalises and returns a
float32 CHW tensor. The DataLoader is set up the way the usual tuning guides say:
``num_workers`` worker processes, ``pin_memory`` when CUDA is present (pinning is impossible
without it), ``persistent_workers`` so workers survive epochs, ``prefetch_factor=2`` batches per
worker. Randomness is a pure function of (seed, epoch, sample index).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Sampler

from benchmarks.errors import BenchmarkError
from benchmarks.harness.sources import list_items
from benchmarks.harness.strategies import MEAN, STD, Batch, RunConfig, Strategy, register
from precompute.policy import ATTEMPTS, POLICIES, RATIO

__all__ = ["PillowTrainDataset", "WorkersStrategy", "random_resized_crop_box"]

PREFETCH_FACTOR = 2


def random_resized_crop_box(
    rng: np.random.Generator,
    width: int,
    height: int,
    scale: tuple[float, float] = POLICIES["online"].scale,
    ratio: tuple[float, float] = RATIO,
) -> tuple[int, int, int, int]:
    """Return a crop box ``(left, top, right, bottom)`` drawn like torchvision's RRC.

    The classic baseline keeps torchvision's own draw (10 tries, then a centre crop); its
    ranges are the ``online`` policy of :mod:`precompute.policy`, as ``TrainAugment``'s are.
    """
    area = width * height
    log_r = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(ATTEMPTS):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_r))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    side = min(width, height)  # fallback: centre crop
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


class PillowTrainDataset(Dataset[tuple[torch.Tensor, int]]):
    """Decode + random resized crop + flip + normalise, indexed by ``(epoch, index)``.

    Args:
        paths: Image files.
        labels: Class index per file.
        size: Output side length.
        seed: Augmentation seed.
    """

    def __init__(self, paths: Sequence[Path], labels: Sequence[int], size: int, seed: int) -> None:
        self.paths, self.labels, self.size, self.seed = list(paths), list(labels), size, seed
        self.mean = np.asarray(MEAN, np.float32) * 255
        self.inv_std = 1.0 / (np.asarray(STD, np.float32) * 255)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int]:
        epoch, index = key
        rng = np.random.default_rng([self.seed, epoch, index])
        path = self.paths[index]
        try:
            with Image.open(path) as im:
                img = im.convert("RGB")
        except (OSError, ValueError) as exc:
            raise BenchmarkError(f"{path}: cannot decode: {exc}") from exc
        box = random_resized_crop_box(rng, img.width, img.height)
        img = img.resize((self.size, self.size), Image.Resampling.BILINEAR, box=box)
        arr = np.asarray(img, dtype=np.float32)
        if rng.random() < 0.5:
            arr = arr[:, ::-1]
        arr = (arr - self.mean) * self.inv_std
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))), self.labels[index]


class EpochSampler(Sampler[tuple[int, int]]):
    """Yields ``(epoch, index)`` in a seeded permutation; the epoch is set by the main process."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, int]]:
        perm = np.random.default_rng([self.seed, 0x5A, self.epoch]).permutation(self.n)
        return iter([(self.epoch, int(i)) for i in perm])


class _WorkersSource:
    def __init__(self, cfg: RunConfig) -> None:
        paths, labels = list_items(cfg.data)
        self.num_samples = len(paths)
        self.device = torch.device(cfg.device)
        self.sampler = EpochSampler(len(paths), cfg.seed)
        workers = cfg.workers
        self.loader = DataLoader(
            PillowTrainDataset(paths, labels, cfg.size, cfg.seed),
            batch_size=cfg.batch_size,
            sampler=self.sampler,
            num_workers=workers,
            pin_memory=torch.cuda.is_available(),
            persistent_workers=workers > 0,
            prefetch_factor=PREFETCH_FACTOR if workers > 0 else None,
            drop_last=True,
        )

    def epoch(self, epoch: int) -> Iterator[Batch]:
        self.sampler.epoch = epoch
        for images, labels in self.loader:
            yield (
                images.to(self.device, non_blocking=True),
                labels.to(self.device, non_blocking=True),
            )

    def close(self) -> None:
        it = getattr(self.loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.loader = None  # type: ignore[assignment]


@register
class WorkersStrategy(Strategy):
    """Classic torch DataLoader + Pillow decode in worker processes."""

    name = "workers"
    description = "torch DataLoader, Pillow decode + RRC/flip/normalise in worker processes"

    def open(self, cfg: RunConfig) -> _WorkersSource:
        """Return the DataLoader-backed epoch source."""
        return _WorkersSource(cfg)
