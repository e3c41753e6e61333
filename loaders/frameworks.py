"""What :mod:`loaders.tf` and :mod:`loaders.jax` share: the backend import and the epochs.

Both serve a :class:`~loaders.torch_loader.StoreLoader`'s batches, so the order, the
augmentation, mixup, the ranks and the resume state are exactly the loader's; this module
holds the little they add on top of it: the framework imported on demand, with an error that
names the extra to install, and the number of epochs one iteration serves.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import torch

from loaders.contract import EPOCH_MOST, check_int
from loaders.torch_loader import StoreLoader

__all__ = ["check_epochs", "epoch_batches", "require"]


def require(module: str, extra: str) -> ModuleType:
    """Import and return ``module``, the backend of ``loaders.<extra>``.

    Raises:
        ImportError: ``module`` is not installed; the message names the extra that installs it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"loaders.{extra} needs {module}, which is not installed: "
            f"pip install 'nostall[{extra}]' ({exc})"
        ) from exc


def check_epochs(epochs: int | None) -> int | None:
    """Return ``epochs`` if it is None or an integer in ``[1, 2**63 - 1]``.

    Raises:
        ValueError: Naming the value otherwise.
    """
    return None if epochs is None else check_int("epochs", epochs, 1, EPOCH_MOST)


def epoch_batches(loader: StoreLoader, epochs: int | None) -> Iterator[dict[str, torch.Tensor]]:
    """Yield the batches of one iteration: one epoch, or every epoch up to ``epochs``.

    ``epochs=None``: the loader's next epoch (each iteration the next one, as iterating a
    :class:`StoreLoader` does; Keras ``fit`` iterates a dataset once per epoch). An integer:
    every epoch from the loader's current one (a resumed state's, with the rest of its epoch)
    until the loader's epoch reaches ``epochs``, so a run resumed from a checkpoint ends where
    an uninterrupted one does. A loader already at or past ``epochs`` serves nothing.
    """
    if epochs is None:
        yield from loader
        return
    while loader.epoch < epochs:
        yield from loader
