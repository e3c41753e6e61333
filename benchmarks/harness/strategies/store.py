"""The strategies that read the precomputed store: StoreLoader, DaliStoreLoader, loaders.tf.

Each builds its loader with the run's batch size, seed and the workload's augmentation (the
same work per sample as the ``workers`` baseline does on the raw files) and turns its dict
batches into ``(inputs, targets)``. Backends are imported lazily; a missing one makes the
strategy ``unavailable`` with the import error as the reason; a store whose fields a loader
cannot serve makes it ``not applicable`` with the loader's own reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from benchmarks.errors import NotApplicable
from benchmarks.harness.strategies import MEAN, STD, RunConfig, Strategy, register
from benchmarks.harness.strategies.epochs import LoaderSource, TfSource

__all__ = ["DaliStoreStrategy", "PrecomputeStrategy", "TfStoreStrategy", "store_samples"]


def store_samples(store: str) -> int:
    """The valid samples of ``store``."""
    from precompute.format.layout import open_store_info

    return int(open_store_info(store).num_valid)


@register
class PrecomputeStrategy(Strategy):
    """StoreLoader over the precomputed store, augmentation on the device."""

    name = "precompute"
    needs_store = True
    description = "StoreLoader: read whole chunks of the Zarr store, augment on the device"
    requires = ("loaders.torch_loader:StoreLoader", "loaders.augment:TrainAugment")

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return a StoreLoader with the workload's augmentation."""
        from loaders.torch_loader import StoreLoader

        workload = cfg.workload
        loader = StoreLoader(
            str(cfg.store),
            cfg.batch_size,
            device=cfg.device,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            augment=workload.store_augment(cfg.threads),
            num_threads=cfg.threads,
            **workload.store_options(str(cfg.store)),
            **workload.store_mixup(),
        )
        source = LoaderSource(loader, store_samples(str(cfg.store)), workload.from_store)
        source.mixes = True  # the loader mixes (--mixup) itself
        return source

    def describe(self, cfg: RunConfig) -> str:
        """The loader and its augmentation."""
        return f"StoreLoader ({cfg.threads} threads) + {cfg.workload.store_text}"


@register
class DaliStoreStrategy(Strategy):
    """DaliStoreLoader over the precomputed store, DALI augmentation."""

    name = "precompute-dali"
    needs_store = True
    description = "DaliStoreLoader: store chunks fed to a DALI pipeline (RRC/flip/normalise)"
    requires = ("nvidia.dali", "loaders.dali:DaliStoreLoader")

    def open(self, cfg: RunConfig) -> LoaderSource:
        """Return a DaliStoreLoader at the run's output size.

        Raises:
            NotApplicable: The store has fields DALI's reader does not serve (its message), or
                the output is not square.
        """
        from loaders.dali import DaliAugment, DaliStoreLoader
        from loaders.errors import StoreOpenError

        augment = DaliAugment(size=cfg.square("DaliStoreLoader"), mean=MEAN, std=STD)
        try:
            loader = DaliStoreLoader(
                str(cfg.store),
                cfg.batch_size,
                augment=augment,
                device=cfg.device,
                shuffle=True,
                seed=cfg.seed,
                drop_last=True,
                num_threads=cfg.threads,
            )
        except StoreOpenError as exc:
            if "DaliStoreLoader serves" in str(exc):
                raise NotApplicable(str(exc).split(": ", 1)[-1]) from None
            raise
        return LoaderSource(loader, store_samples(str(cfg.store)))


class _TfStoreSource(TfSource):
    """One ``loaders.tf`` iterator for every epoch of the run (``epochs=E``), as advised."""

    def __init__(self, ds: Any, state: Any, cfg: RunConfig, split: Any = None) -> None:
        self.ds, self.state = ds, state
        self.iterator: Iterator[Any] | None = None
        super().__init__(self._batches, store_samples(str(cfg.store)), torch.device(cfg.device),
                         split=split)  # fmt: skip
        self.loader = ds

    def _batches(self, epoch: int) -> Iterator[Any]:
        if self.iterator is None:
            self.iterator = iter(self.ds)
        loader = self.state.loader
        for _ in range(len(loader)):
            got = next(self.iterator, None)
            if got is None:
                return
            yield got

    def close(self) -> None:
        """Close the loader behind the dataset."""
        loader = self.state.loader
        self.iterator = None
        if loader is not None:
            loader.close()
        super().close()


@register
class TfStoreStrategy(Strategy):
    """The same store through ``loaders.tf`` (a ``tf.data.Dataset`` for Keras)."""

    name = "tf-store"
    needs_store = True
    description = "loaders.tf.dataset: the store's StoreLoader batches as a tf.data.Dataset"
    requires = ("tensorflow", "loaders.tf:dataset")

    def open(self, cfg: RunConfig) -> _TfStoreSource:
        """Return the dataset, one iterator over the run's epochs (``epochs=E``)."""
        from loaders import tf as ltf

        workload = cfg.workload
        state = ltf.LoaderState()
        carried = bool(workload.carried)  # then the batch dict, split as the store loader's
        ds = ltf.dataset(
            str(cfg.store),
            cfg.batch_size,
            inputs=None if carried else workload.input,
            target=None if carried else workload.store_target,
            epochs=cfg.epochs,
            state=state,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            augment=workload.store_augment(cfg.threads),
            num_threads=cfg.threads,
            **workload.store_options(str(cfg.store)),
            **workload.store_mixup(),
        )
        source = _TfStoreSource(ds, state, cfg, workload.from_store if carried else None)
        source.mixes = True  # the loader mixes (--mixup) itself
        return source

    def describe(self, cfg: RunConfig) -> str:
        """The dataset and its loader's augmentation."""
        carried = cfg.workload.carried
        dicts = f"; the batch dicts, to carry {', '.join(carried)}" if carried else ""
        return (
            f"loaders.tf.dataset(epochs={cfg.epochs}, one iterator{dicts}) over StoreLoader "
            f"({cfg.threads} threads) + {cfg.workload.store_text}"
        )
