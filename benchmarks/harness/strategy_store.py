"""nostall strategies: the precomputed store (torch or DALI reader) and DALI decoding of JPEGs.

Each is a thin adapter: it builds the loader with the same batch size, output size, seed and
augmentation (random resized crop + flip + normalise) as the ``workers`` baseline and turns its
dict batches into ``(image, label)``. Backends are imported lazily; a missing one makes the
strategy ``unavailable`` with the import error as the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from benchmarks.harness.strategies import MEAN, STD, Batch, RunConfig, Strategy, register

__all__ = ["DaliStoreStrategy", "GpuDecodeStrategy", "LoaderSource", "PrecomputeStrategy"]


class LoaderSource:
    """Adapts a nostall loader (``set_epoch``, ``len``, dict batches) to an epoch source.

    ``target``: the batch key of the targets (``label``; ``target`` with mixup).
    """

    def __init__(self, loader: Any, num_samples: int, target: str = "label") -> None:
        self.loader = loader
        self.num_samples = num_samples
        self.target = target

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The ``(images, targets)`` batches of ``epoch``."""
        self.loader.set_epoch(epoch)
        for batch in self.loader:
            yield batch["image"], batch[self.target]

    def close(self) -> None:
        """Close the loader (once)."""
        close = getattr(self.loader, "close", None)
        if callable(close):
            close()
        self.loader = None


def _store_samples(store: str) -> int:
    from precompute.format.layout import open_store_info

    return open_store_info(store).num_valid


@register
class PrecomputeStrategy(Strategy):
    """StoreLoader over the precomputed store, augmentation on the device."""

    name = "precompute"
    needs_store = True
    description = "StoreLoader: read whole chunks of the Zarr store, RRC/flip/normalise on device"
    requires = ("loaders.torch_loader:StoreLoader", "loaders.augment:TrainAugment")

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return a StoreLoader with TrainAugment at the run's output size."""
        from loaders.augment import TrainAugment
        from loaders.torch_loader import StoreLoader

        threads = min(64, max(1, cfg.workers))
        # normalisation: TrainAugment's default (ImageNet mean/std, as MEAN/STD here)
        augment = TrainAugment(size=(cfg.size, cfg.size), threads=threads)
        loader = StoreLoader(
            str(cfg.store),
            cfg.batch_size,
            device=cfg.device,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            augment=augment,
            num_threads=threads,
        )
        return LoaderSource(loader, _store_samples(str(cfg.store)))


@register
class DaliStoreStrategy(Strategy):
    """DaliStoreLoader over the precomputed store, DALI augmentation."""

    name = "precompute-dali"
    needs_store = True
    description = "DaliStoreLoader: store chunks fed to a DALI pipeline (RRC/flip/normalise)"
    requires = ("nvidia.dali", "loaders.dali:DaliStoreLoader")

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return a DaliStoreLoader at the run's output size."""
        from loaders.dali import DaliAugment, DaliStoreLoader

        augment = DaliAugment(size=cfg.size, mean=MEAN, std=STD)
        if cfg.store is None:
            raise ValueError("precompute-dali needs a store (--store or a build)")
        loader = DaliStoreLoader(
            cfg.store,
            cfg.batch_size,
            augment=augment,
            device=cfg.device,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            num_threads=max(1, cfg.workers),
        )
        return LoaderSource(loader, _store_samples(str(cfg.store)))


@register
class GpuDecodeStrategy(Strategy):
    """DALI JpegLoader: decode the raw files with DALI (nvJPEG on a GPU, CPU here)."""

    name = "gpu-decode"
    description = "DALI JpegLoader: decode raw JPEG/PNG with DALI (mixed/GPU, CPU without one)"
    requires = ("nvidia.dali", "loaders.dali:JpegLoader")

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return a JpegLoader over the raw data."""
        from loaders.dali import DaliAugment, JpegLoader

        augment = DaliAugment(size=cfg.size, mean=MEAN, std=STD)
        loader = JpegLoader(
            cfg.data,
            cfg.batch_size,
            cfg.size,
            augment=augment,
            device=cfg.device,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            num_threads=max(1, cfg.workers),
        )
        return LoaderSource(loader, loader.num_samples)
