"""What :mod:`loaders.tf` and :mod:`loaders.jax` share: the backend import and the epochs.

Both serve a :class:`~loaders.torch_loader.StoreLoader`'s batches, so the order, the
augmentation, mixup, the ranks and the resume state are exactly the loader's; this module
holds the little they add on top of it: the framework imported on demand, with an error that
names the extra to install, the number of epochs one iteration serves, and
:class:`Forwarding`: the loader's ``len``, epoch, state and ``close`` on a wrapper of it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any, Self

import torch

from loaders.contract import EPOCH_MOST, check_int
from loaders.torch_loader import StoreLoader

__all__ = ["Forwarding", "check_epochs", "epoch_batches", "require"]


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


class Forwarding:
    """A wrapper of :attr:`loader` that forwards its epoch, state, ``len`` and ``close``.

    A framework's view of a :class:`StoreLoader` (``loaders.jax.Batches``) subclasses it and
    adds its own ``__iter__``; the epoch and resume rules stay the loader's.
    """

    loader: StoreLoader

    def __len__(self) -> int:
        """Batches of the loader's current epoch."""
        return len(self.loader)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration serves (first)."""
        return self.loader.epoch

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch`` from its first batch next (:meth:`StoreLoader.set_epoch`)."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The loader's state after the last batch handed out (JSON-able)."""
        return self.loader.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state`` on the next iteration (:meth:`StoreLoader.load_state_dict`)."""
        self.loader.load_state_dict(state)

    def close(self) -> None:
        """Close the loader (idempotent)."""
        self.loader.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
