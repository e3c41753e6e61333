"""StoreLoader under a real ``lightning.Trainer`` on the CPU: epochs advance, resume is exact.

The DataModule is the README's: ``train_dataloader`` returns a ``StoreLoader``. Lightning
takes ``len(loader)`` batches per epoch and never runs the iterator to its end, and it saves
and restores the loader's ``state_dict`` in its checkpoints by itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from loaders import StoreLoader
from tests.contracts.loader_contract import collect, make_index_store

L = pytest.importorskip("lightning")

N, BATCH = 48, 8  # 6 batches an epoch


class Recorder(L.LightningModule):
    """A tiny model that records the sample indices of every training batch it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 7)
        self.seen: list[tuple[int, int, list[int]]] = []

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
        return StoreLoader(self.store, BATCH, device=self.trainer.strategy.root_device,
                           seed=3, prefetch=0)


class SaveAt(L.Callback):
    """Save a checkpoint after global step ``step`` (mid-epoch), as a periodic save would."""

    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def _trainer(max_epochs: int, callbacks: list[Any] | None = None) -> Any:
    return L.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                     enable_progress_bar=False, enable_checkpointing=False,
                     enable_model_summary=False, use_distributed_sampler=False,
                     callbacks=callbacks or [], num_sanity_val_steps=0)


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
    assert epochs[0] != epochs[1] != epochs[2]


@pytest.mark.parametrize("step", [9, 6, 2])  # mid-epoch 1, the end of epoch 0, mid-epoch 0
def test_resume_from_a_checkpoint_serves_the_same_remainder(store: Path, tmp_path: Path,
                                                            step: int) -> None:
    ckpt = tmp_path / "saved.ckpt"
    first = Recorder()
    _trainer(2, [SaveAt(step, ckpt)]).fit(first, Data(store))
    assert ckpt.exists()
    resumed = Recorder()
    _trainer(2).fit(resumed, Data(store), ckpt_path=ckpt)
    assert resumed.seen == first.seen[step:]
    assert [(e, b) for e, b, _ in resumed.seen] == [divmod(s, 6) for s in range(step, 12)]
