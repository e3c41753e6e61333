"""Multi-rank training under a real ``torchrun --nproc-per-node 2`` (gloo on the CPU).

``ddp_train.py`` is the README's DDP example. Checked here: every epoch the ranks get disjoint,
equally long shards (its DDP step per batch would hang otherwise), a validation pass covers
every sample exactly once and its all-reduced metric is the single-process one, and a job
killed mid-epoch resumes from the per-rank states to the same order. A state saved mid-epoch
resumes on another world size only with its global batch kept (``tests/loaders/test_elastic.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from loaders import StoreLoader
from loaders.errors import LoaderError
from tests.contracts.loader_contract import collect, make_index_store
from tests.loaders import ddp_train
from tests.servers import free_port

WORLD, STOP = 2, 2
N, HOLES = 203, (0, 9, 10, 57, 120, 201)  # uneven: 197 samples over 2 ranks
SCRIPT = Path(__file__).with_name("ddp_train.py")
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(store: Path, out: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={WORLD}",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(SCRIPT),
        str(store),
        str(out),
        mode,
        str(STOP),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, check=False)


def _seen(out: Path, mode: str) -> list[dict[str, Any]]:
    return [json.loads((out / f"{mode}-{r}.json").read_text()) for r in range(WORLD)]


def _epoch(store: Path, rank: int, epoch: int) -> list[list[int]]:
    loader = StoreLoader(store, ddp_train.BATCH, seed=ddp_train.SEED, rank=rank, world_size=WORLD)
    loader.set_epoch(epoch)
    return [b["index"].tolist() for b in collect(loader)]


@pytest.mark.slow
def test_torchrun_training_validation_and_resume(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", N, holes=HOLES)
    killed = _torchrun(store, tmp_path, "train")
    assert killed.returncode != 0, killed.stdout + killed.stderr  # SIGKILLed mid-epoch
    train = _seen(tmp_path, "train")
    assert [(s["rank"], s["world_size"]) for s in train] == [(r, WORLD) for r in range(WORLD)]
    valid = sorted(set(range(N)) - set(HOLES))
    epoch0 = [[i for batch in s["epoch0"] for i in batch] for s in train]
    assert {len(e) for e in epoch0} == {96}  # 197 // 2 = 98 a rank, 12 whole batches
    served = {i for e in epoch0 for i in e}
    assert len(served) == WORLD * 96 and served <= set(valid)  # disjoint shards
    for r in range(WORLD):
        assert train[r]["epoch0"] == _epoch(store, r, 0)

    val_index = np.concatenate([s["val"]["index"] for s in train])
    val_pad = np.concatenate([s["val"]["is_pad"] for s in train]).astype(bool)
    assert sorted(val_index[~val_pad].tolist()) == valid  # every sample exactly once
    assert val_pad.sum() == 1  # 2 x 99 - 197
    single = StoreLoader(store, 8, shuffle=False, drop_last=False)
    batches = collect(single)
    want = [
        sum(
            int((ddp_train.guess(torch.from_numpy(b["image"])).numpy() == b["label"]).sum())
            for b in batches
        ),
        sum(len(b["index"]) for b in batches),
    ]
    assert all(s["val"]["counts"] == want for s in train)

    resumed = _torchrun(store, tmp_path, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for r, s in enumerate(_seen(tmp_path, "resume")):
        assert len(train[r]["epoch1"]) == STOP
        assert train[r]["epoch1"] + s["epoch1"] == _epoch(store, r, 1)

    state = torch.load(tmp_path / "state-0.pt")  # mid-epoch: a global batch of 2 x 8
    other = StoreLoader(store, 8, seed=ddp_train.SEED, rank=0, world_size=3)
    with pytest.raises(LoaderError, match=r"global batch of 16; .*3 ranks cannot share it"):
        other.load_state_dict(state)
