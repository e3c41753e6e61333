"""The Lightning parts of ``test_lightning``: a recording model, the README's DataModule, a
checkpoint callback and a CPU ``Trainer``.

A module of their own, imported by the tests that use them: collecting ``test_lightning`` then
imports no Lightning (about 2 s of CPU in every xdist worker), and spawned DDP ranks unpickle
these classes by this module's name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch

from benchmarks.examples.stores import trainer as example_trainer
from loaders import StoreLoader

N, BATCH = 48, 8  # 6 batches an epoch
GLOBAL_BATCH = 16  # GlobalData's batch over all devices


class Recorder(L.LightningModule):
    """A tiny model that records the sample indices of every training batch it sees."""

    def __init__(self, out: Path | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 7)
        self.seen: list[tuple[int, int, list[int]]] = []
        self.out = out  # where each rank writes what it saw (spawned ranks share no memory)

    def on_train_end(self) -> None:
        if self.out is not None:
            (self.out / f"rank{self.global_rank}.json").write_text(json.dumps(self.seen))

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.seen.append((self.current_epoch, batch_idx, batch["index"].tolist()))
        features = batch["image"].float().mean(dim=(1, 2)) / 255
        return torch.nn.functional.cross_entropy(self.layer(features), batch["label"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Data(L.LightningDataModule):
    """The README's DataModule."""

    def __init__(self, store: Path) -> None:
        super().__init__()
        self.store = store

    def train_dataloader(self) -> StoreLoader:
        return StoreLoader(
            self.store, BATCH, device=self.trainer.strategy.root_device, seed=3, prefetch=0
        )


class GlobalData(Data):
    """A DataModule that keeps its global batch on any device count (``batch_size`` per rank).

    What lets a checkpoint resume on another number of devices: the loader serves the rest of
    the saved epoch in the same global batches (``docs/loaders.md``, "Choosing samples").
    """

    def train_dataloader(self) -> StoreLoader:
        per_rank = GLOBAL_BATCH // self.trainer.world_size
        return StoreLoader(
            self.store, per_rank, device=self.trainer.strategy.root_device, seed=3, prefetch=0
        )


class SaveAt(L.Callback):
    """Save a checkpoint after global step ``step`` (mid-epoch), as a periodic save would."""

    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def trainer(max_epochs: int, callbacks: list[Any] | None = None, **kw: Any) -> Any:
    """The examples' CPU ``Trainer`` (one device unless ``kw`` says otherwise)."""
    return example_trainer(max_epochs, callbacks=callbacks or [], **{"devices": 1, **kw})


def ddp_rank(
    rank: int, world: int, port: int, store: Path, ckpt: Path, first: Path, resumed: Path
) -> None:
    """One DDP rank of a process group launched from outside Lightning (as torchrun launches).

    The first fit saves a checkpoint mid-epoch (rank 0's loader state) and runs on; a second
    ``Trainer`` in the same process resumes from it. Each fit records what this rank saw in
    ``first`` and ``resumed``.
    """
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NODE_RANK="0")
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank))
    ddp = {"devices": world, "strategy": "ddp"}
    trainer(2, [SaveAt(4, ckpt)], **ddp).fit(Recorder(first), Data(store))  # epoch 1, batch 1
    trainer(2, **ddp).fit(Recorder(resumed), Data(store), ckpt_path=ckpt)


class WithValidation(Data):
    """The DataModule with a validation StoreLoader (Lightning inspects its sampler)."""

    def val_dataloader(self) -> StoreLoader:
        return StoreLoader(self.store, BATCH, shuffle=False, drop_last=False, prefetch=0)


class Validated(Recorder):
    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log("seen", float(len(batch["index"])))
