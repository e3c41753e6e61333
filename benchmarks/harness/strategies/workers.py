"""The classic baseline: a torch DataLoader whose workers decode and augment every item.

Each worker reads an item, decodes it as the build does (Pillow for images and masks,
soundfile + soxr and the log-mel for audio, numpy for arrays:
:mod:`benchmarks.harness.workloads.items`) and applies the workload's per-item transform
(random resized crop + flip of the image and with it its mask, points or boxes, a random
crop and masks of a log-mel, flips of a patch; normalisation), returning ``(x, y)`` tensors.
The DataLoader is set up the way the usual tuning guides say: ``num_workers`` worker
processes, ``pin_memory`` when CUDA is present (pinning is impossible without it),
``persistent_workers`` so workers survive epochs, ``prefetch_factor=2`` batches per worker.
Randomness is a pure function of (seed, epoch, sample index).

:class:`PillowTrainDataset` is the image-classification item of a class folder by path (the
suites' classic reference, and the doctor's).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from benchmarks.errors import BenchmarkError
from benchmarks.harness.strategies import Batch, RunConfig, Strategy, register, to_device
from benchmarks.harness.workloads.crops import crop_pixels, random_resized_crop_box
from benchmarks.harness.workloads.items import EpochSampler, ItemDataset

__all__ = [
    "EpochSampler",
    "PillowTrainDataset",
    "WorkersStrategy",
    "classic_loader",
    "random_resized_crop_box",
]

PREFETCH_FACTOR = 2


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
        out = crop_pixels(img, box, self.size, bool(rng.random() < 0.5))
        return torch.from_numpy(out), self.labels[index]


def classic_loader(
    dataset: Dataset[tuple[torch.Tensor, torch.Tensor]], cfg: RunConfig, sampler: EpochSampler
) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    """The DataLoader every classic baseline uses, tuned as the guides say."""
    workers = cfg.workers
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        sampler=sampler,
        num_workers=workers,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=workers > 0,
        prefetch_factor=PREFETCH_FACTOR if workers > 0 else None,
        drop_last=True,
    )


class _WorkersSource:
    def __init__(self, cfg: RunConfig) -> None:
        workload = cfg.workload
        dataset = ItemDataset(cfg.plan, workload.item_transform(cfg.seed), cfg.seed)
        self.num_samples = len(dataset)
        self.device = torch.device(cfg.device)
        self.sampler = EpochSampler(self.num_samples, cfg.seed)
        self.loader = classic_loader(dataset, cfg, self.sampler)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        self.sampler.epoch = epoch
        for x, y in self.loader:
            yield x.to(self.device, non_blocking=True), to_device(y, self.device)

    def close(self) -> None:
        it = getattr(self.loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.loader = None  # type: ignore[assignment]


@register
class WorkersStrategy(Strategy):
    """Classic torch DataLoader: decode + augment each item in worker processes."""

    name = "workers"
    description = "torch DataLoader, decode + per-item augmentation in worker processes"

    def open(self, cfg: RunConfig) -> _WorkersSource:
        """Return the DataLoader-backed epoch source."""
        return _WorkersSource(cfg)

    def describe(self, cfg: RunConfig) -> str:
        """The DataLoader and what its workers do for the run's workload."""
        return f"torch DataLoader ({cfg.workers} workers): {cfg.workload.classic_text}"
