"""The feeds the check adds to :mod:`benchmarks.harness.strategies`: store + mixup, nvJPEG.

* ``store-f32`` / ``store-bf16``: :class:`loaders.StoreLoader` + :class:`TrainAugment` (float32
  NCHW, or bfloat16 channels-last) + :class:`Mixup`, batches ``(image, soft target)``.
* ``nvjpeg``: the raw JPEGs read on the training thread and decoded by torchvision's
  ``decode_jpeg`` (nvJPEG with ``device="cuda"``; the CPU decoder with ``--cpu``), placed in
  one zero canvas with each image's extent, then the same :class:`TrainAugment` +
  :class:`Mixup` on the device: the stand-in for DALI's GPU decode where DALI is missing. No
  prefetch and no worker: each batch is read and decoded when the step asks for it.

The classic baseline is the harness's own ``workers`` strategy (Pillow in DataLoader workers).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from benchmarks.harness.sources import list_items, num_classes
from benchmarks.harness.strategies import Batch, RunConfig, Strategy, register
from benchmarks.harness.strategies.epochs import LoaderSource
from loaders.augment import Mixup, TrainAugment
from loaders.batching.order import batch_seed

__all__ = ["NvjpegFeed", "StoreBf16Feed", "StoreF32Feed", "train_augment"]


def train_augment(cfg: RunConfig, bf16: bool) -> TrainAugment:
    """The check's augmentation: RRC + flip + normalise to ``cfg.size``, dtype and format."""
    return TrainAugment(
        size=cfg.hw,
        dtype="bfloat16" if bf16 else "float32",
        channels_last=bf16,
        threads=min(64, max(1, cfg.workers)),
    )


class StoreF32Feed(Strategy):
    """StoreLoader + TrainAugment (float32 NCHW) + Mixup."""

    name = "store-f32"
    needs_store = True
    description = "StoreLoader + TrainAugment float32 NCHW + Mixup, augmentation on the device"
    bf16: ClassVar[bool] = False

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return the StoreLoader over ``cfg.store``."""
        from loaders.torch_loader import StoreLoader
        from precompute.format.layout import open_store_info

        loader = StoreLoader(
            str(cfg.store),
            cfg.batch_size,
            device=cfg.device,
            seed=cfg.seed,
            augment=train_augment(cfg, self.bf16),
            mixup=Mixup(num_classes=num_classes(cfg.data)),
            num_threads=min(64, max(1, cfg.workers)),
        )
        n = open_store_info(str(cfg.store)).num_valid
        return LoaderSource(loader, n, lambda b: (b["image"], b["target"]))


class StoreBf16Feed(StoreF32Feed):
    """StoreLoader + TrainAugment (bfloat16 channels-last) + Mixup."""

    name = "store-bf16"
    description = "StoreLoader + TrainAugment bfloat16 channels-last + Mixup, on the device"
    bf16 = True


class _NvjpegSource:
    def __init__(self, cfg: RunConfig) -> None:
        paths, labels = list_items(cfg.data)
        self.paths: list[Path] = paths
        self.labels = torch.tensor(labels, dtype=torch.int64)
        self.num_samples = len(paths)
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.augment = train_augment(cfg, bf16=self.device.type == "cuda")
        self.mixup = Mixup(num_classes=num_classes(cfg.data))

    def _decode(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        from torchvision.io import decode_jpeg

        data = [
            torch.frombuffer(bytearray(self.paths[i].read_bytes()), dtype=torch.uint8) for i in rows
        ]
        decoded = decode_jpeg(data, device=self.device)  # [3, h, w] uint8 each
        height = max(int(d.shape[1]) for d in decoded)
        width = max(int(d.shape[2]) for d in decoded)
        canvas = torch.zeros((len(rows), height, width, 3), dtype=torch.uint8, device=self.device)
        extents = torch.zeros((len(rows), 4), dtype=torch.int32)
        for i, d in enumerate(decoded):
            canvas[i, : d.shape[1], : d.shape[2]] = d.permute(1, 2, 0)
            extents[i, 2], extents[i, 3] = d.shape[1], d.shape[2]
        return canvas, extents.to(self.device, non_blocking=True)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(self.num_samples)
        size = self.cfg.batch_size
        for number in range(self.num_samples // size):
            rows = order[number * size : (number + 1) * size]
            images, extents = self._decode(rows)
            gen = torch.Generator(device=self.device)
            gen.manual_seed(batch_seed(self.cfg.seed, epoch, 0, number))
            out = self.augment(images, extents, gen)
            labels = self.labels[torch.from_numpy(rows)].to(self.device, non_blocking=True)
            yield self.mixup(out, labels, gen)

    def close(self) -> None:
        self.paths = []


class NvjpegFeed(Strategy):
    """torchvision ``decode_jpeg`` (nvJPEG on CUDA) + the store feeds' augmentation and mixup."""

    name = "nvjpeg"
    description = (
        "torchvision decode_jpeg (nvJPEG on CUDA) on the training thread, then TrainAugment "
        "+ Mixup on the device: the stand-in for DALI GPU decode"
    )
    requires = ("torchvision.io:decode_jpeg",)

    def open(self, cfg: RunConfig) -> _NvjpegSource:
        """Return the decode-per-batch source over ``cfg.data``."""
        return _NvjpegSource(cfg)


for _feed in (StoreF32Feed, StoreBf16Feed, NvjpegFeed):
    register(_feed)
