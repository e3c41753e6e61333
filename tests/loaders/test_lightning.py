"""StoreLoader under a real ``lightning.Trainer`` on the CPU: epochs advance, resume is exact.

The DataModule is the README's: ``train_dataloader`` returns a ``StoreLoader``. Lightning
takes ``len(loader)`` batches per epoch and never runs the iterator to its end, and it saves
and restores the loader's ``state_dict`` in its checkpoints by itself; under DDP it writes
rank 0's state only and every rank loads that.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from loaders import StoreLoader
from tests.contracts.loader_contract import collect, make_index_store

N, BATCH = 48, 8  # 6 batches an epoch


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


class SaveAt(L.Callback):
    """Save a checkpoint after global step ``step`` (mid-epoch), as a periodic save would."""

    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def _trainer(max_epochs: int, callbacks: list[Any] | None = None, **kw: Any) -> Any:
    return L.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=callbacks or [],
        num_sanity_val_steps=0,
        **{"devices": 1, **kw},
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("lightning") / "s", N)


def _epoch(seen: list[tuple[int, int, list[int]]], epoch: int) -> list[int]:
    return [i for e, _, batch in seen if e == epoch for i in batch]


def test_each_epoch_is_a_new_permutation(store: Path) -> None:
    model = Recorder()
    _trainer(3).fit(model, Data(store))
    epochs = [_epoch(model.seen, e) for e in range(3)]
    for e, got in enumerate(epochs):
        assert sorted(got) == list(range(N))  # every epoch a permutation
        want = StoreLoader(store, BATCH, seed=3)
        want.set_epoch(e)
        assert got == np.concatenate([b["index"] for b in collect(want)]).tolist()
    assert all(a != b for a, b in itertools.combinations(epochs, 2))  # 0 and 2 too


class WithValidation(Data):
    """The DataModule with a validation StoreLoader (Lightning inspects its sampler)."""

    def val_dataloader(self) -> StoreLoader:
        return StoreLoader(self.store, BATCH, shuffle=False, drop_last=False, prefetch=0)


class Validated(Recorder):
    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log("seen", float(len(batch["index"])))


def test_limit_train_batches_gives_each_epoch_its_own_batches(store: Path, tmp_path: Path) -> None:
    """Lightning takes 2 of 6 batches an epoch: each epoch must be a new one, not the same 2."""
    model = Validated()
    _trainer(3, limit_train_batches=2, limit_val_batches=1).fit(model, WithValidation(store))
    for e in range(3):
        want = StoreLoader(store, BATCH, seed=3)
        want.set_epoch(e)
        head = np.concatenate([b["index"] for b in collect(want, limit=2)]).tolist()
        assert _epoch(model.seen, e) == head
    assert _epoch(model.seen, 0) != _epoch(model.seen, 1)
    ckpt = tmp_path / "end0.ckpt"  # saved at the end of Lightning's epoch 0 (2 batches in)
    first = Recorder()
    _trainer(3, [SaveAt(2, ckpt)], limit_train_batches=2).fit(first, Data(store))
    resumed = Recorder()
    _trainer(3, limit_train_batches=2).fit(resumed, Data(store), ckpt_path=ckpt)
    assert resumed.seen == first.seen[2:]


@pytest.mark.parametrize("step", [9, 6, 2])  # mid-epoch 1, the end of epoch 0, mid-epoch 0
def test_resume_from_a_checkpoint_serves_the_same_remainder(
    store: Path, tmp_path: Path, step: int
) -> None:
    ckpt = tmp_path / "saved.ckpt"
    first = Recorder()
    _trainer(2, [SaveAt(step, ckpt)]).fit(first, Data(store))
    assert ckpt.exists()
    resumed = Recorder()
    _trainer(2).fit(resumed, Data(store), ckpt_path=ckpt)
    assert resumed.seen == first.seen[step:]
    assert [(e, b) for e, b, _ in resumed.seen] == [divmod(s, 6) for s in range(step, 12)]


@pytest.mark.slow
def test_ddp_resume_from_rank_zeros_checkpoint(store: Path, tmp_path: Path) -> None:
    # two spawned ranks (gloo); the checkpoint holds rank 0's loader state, loaded by both
    ddp = {"devices": 2, "strategy": "ddp_spawn"}
    ckpt, first, resumed = tmp_path / "mid.ckpt", tmp_path / "first", tmp_path / "resumed"
    first.mkdir()
    resumed.mkdir()
    _trainer(2, [SaveAt(4, ckpt)], **ddp).fit(Recorder(first), Data(store))  # epoch 1, batch 1
    _trainer(2, **ddp).fit(Recorder(resumed), Data(store), ckpt_path=ckpt)
    seen = [
        [json.loads((d / f"rank{r}.json").read_text()) for r in range(2)] for d in (first, resumed)
    ]
    for rank in range(2):
        assert len(seen[0][rank]) == 6  # 48 samples, 2 ranks, batches of 8: 3 an epoch
        assert seen[1][rank] == seen[0][rank][4:]
    epoch = [[i for _, _, batch in seen[0][r][:3] for i in batch] for r in range(2)]
    assert sorted(epoch[0] + epoch[1]) == list(range(N))  # disjoint halves of the epoch
