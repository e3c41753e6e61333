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
from typing import TYPE_CHECKING

import numpy as np
import pytest

from loaders import StoreLoader
from tests.contracts.loader_contract import collect, make_index_store
from tests.lazymodule import LazyModule
from tests.servers import free_port

if TYPE_CHECKING:
    from tests.loaders import lightning_parts as parts
else:  # Lightning is imported by the first test, not at collection
    parts = LazyModule("tests.loaders.lightning_parts")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("lightning") / "s", parts.N)


def _epoch(seen: list[tuple[int, int, list[int]]], epoch: int) -> list[int]:
    return [i for e, _, batch in seen if e == epoch for i in batch]


def test_each_epoch_is_a_new_permutation(store: Path) -> None:
    model = parts.Recorder()
    parts.trainer(3).fit(model, parts.Data(store))
    epochs = [_epoch(model.seen, e) for e in range(3)]
    for e, got in enumerate(epochs):
        assert sorted(got) == list(range(parts.N))  # every epoch a permutation
        want = StoreLoader(store, parts.BATCH, seed=3)
        want.set_epoch(e)
        assert got == np.concatenate([b["index"] for b in collect(want)]).tolist()
    assert all(a != b for a, b in itertools.combinations(epochs, 2))  # 0 and 2 too


def test_limit_train_batches_gives_each_epoch_its_own_batches(store: Path, tmp_path: Path) -> None:
    """Lightning takes 2 of 6 batches an epoch: each epoch must be a new one, not the same 2."""
    model = parts.Validated()
    parts.trainer(3, limit_train_batches=2, limit_val_batches=1).fit(
        model, parts.WithValidation(store)
    )
    for e in range(3):
        want = StoreLoader(store, parts.BATCH, seed=3)
        want.set_epoch(e)
        head = np.concatenate([b["index"] for b in collect(want, limit=2)]).tolist()
        assert _epoch(model.seen, e) == head
    assert _epoch(model.seen, 0) != _epoch(model.seen, 1)
    ckpt = tmp_path / "end0.ckpt"  # saved at the end of Lightning's epoch 0 (2 batches in)
    first = parts.Recorder()
    parts.trainer(3, [parts.SaveAt(2, ckpt)], limit_train_batches=2).fit(first, parts.Data(store))
    resumed = parts.Recorder()
    parts.trainer(3, limit_train_batches=2).fit(resumed, parts.Data(store), ckpt_path=ckpt)
    assert resumed.seen == first.seen[2:]


@pytest.mark.parametrize("step", [9, 6, 2])  # mid-epoch 1, the end of epoch 0, mid-epoch 0
def test_resume_from_a_checkpoint_serves_the_same_remainder(
    store: Path, tmp_path: Path, step: int
) -> None:
    ckpt = tmp_path / "saved.ckpt"
    first = parts.Recorder()
    parts.trainer(2, [parts.SaveAt(step, ckpt)]).fit(first, parts.Data(store))
    assert ckpt.exists()
    resumed = parts.Recorder()
    parts.trainer(2).fit(resumed, parts.Data(store), ckpt_path=ckpt)
    assert resumed.seen == first.seen[step:]
    assert [(e, b) for e, b, _ in resumed.seen] == [divmod(s, 6) for s in range(step, 12)]


@pytest.mark.slow
def test_ddp_resume_from_rank_zeros_checkpoint_on_two_devices_and_on_one(
    store: Path, tmp_path: Path
) -> None:
    # two ranks (gloo) launched as torchrun would, each fitting twice: the checkpoint holds
    # rank 0's loader state, loaded by both; then one device resumes it
    import torch.multiprocessing as mp

    ckpt, first, resumed = tmp_path / "mid.ckpt", tmp_path / "first", tmp_path / "resumed"
    first.mkdir()
    resumed.mkdir()
    mp.spawn(parts.ddp_rank, (2, free_port(), store, ckpt, first, resumed), nprocs=2)
    seen = [
        [json.loads((d / f"rank{r}.json").read_text()) for r in range(2)] for d in (first, resumed)
    ]
    for rank in range(2):
        assert len(seen[0][rank]) == 6  # 48 samples, 2 ranks, batches of 8: 3 an epoch
        assert seen[1][rank] == seen[0][rank][4:]
    epoch = [[i for _, _, batch in seen[0][r][:3] for i in batch] for r in range(2)]
    assert sorted(epoch[0] + epoch[1]) == list(range(parts.N))  # disjoint halves of the epoch
    # the same checkpoint on one device, the global batch kept (16): no hand edits
    one = parts.Recorder()
    parts.trainer(2).fit(one, parts.GlobalData(store), ckpt_path=ckpt)
    # rank 0's batch b, then rank 1's: the global batches the two ranks served after the save
    want = [(e, b, r0 + r1) for (e, b, r0), (_, _, r1) in zip(*seen[0], strict=True)][4:]
    assert one.seen == want
    epoch1 = [i for r in range(2) for _, _, batch in seen[0][r][3:4] for i in batch]
    epoch1 += [i for e, _, batch in one.seen if e == 1 for i in batch]
    assert sorted(epoch1) == list(range(parts.N))  # epoch 1 exactly once
