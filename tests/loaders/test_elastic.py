"""A 4-rank ``torchrun`` job stopped mid-epoch, resumed on 2 and on 3 ranks: the rest exactly once.

``elastic_train.py`` serves class-balanced batches (weighted draws: a sample may be drawn
twice, each draw served once) with a DDP step each (its all-reduce hangs if a rank has fewer
batches). Checked: the resumed runs serve, global batch by global batch, exactly the samples
an uninterrupted 4-rank epoch would have served after the checkpoint, and the stopped part
plus the resumed part is the whole epoch, each draw exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.index_store import collect, make_index_store
from tests.loaders import elastic_train
from tests.servers import free_port

SCRIPT = Path(__file__).with_name("elastic_train.py")
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(world: int, store: Path, out: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}",
        "--master-addr=127.0.0.1", f"--master-port={free_port()}",
        str(SCRIPT), str(store), str(out), mode,
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, check=False)


def _seen(out: Path, mode: str, world: int) -> list[list[list[int]]]:
    return [json.loads((out / f"{mode}-{world}-{r}.json").read_text()) for r in range(world)]


def _global_batches(per_rank: list[list[list[int]]]) -> list[list[int]]:
    return [sorted(i for rank in per_rank for i in rank[b]) for b in range(len(per_rank[0]))]


@pytest.mark.slow
def test_a_4_rank_job_resumes_on_2_and_on_3_ranks(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 203, holes=(0, 9, 57, 120), chunk_samples=8)
    killed = _torchrun(4, store, tmp_path, "train")
    assert killed.returncode != 0, killed.stdout + killed.stderr  # SIGKILLed mid-epoch
    head = _global_batches(_seen(tmp_path, "train", 4))
    assert len(head) == elastic_train.STOP
    whole = []  # the uninterrupted 4-rank epoch, each rank in this process
    for rank in range(4):
        loader = elastic_train.make_loader(str(store), 4, rank)
        whole.append([b["index"].tolist() for b in collect(loader)])
    want = _global_batches(whole)
    assert head == want[: elastic_train.STOP]
    for world in (2, 3):
        resumed = _torchrun(world, store, tmp_path, "resume")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        per_rank = _seen(tmp_path, "resume", world)
        assert {len(r) for r in per_rank} == {len(want) - elastic_train.STOP}
        assert {len(b) for r in per_rank for b in r} == {24 // world}
        assert _global_batches(per_rank) == want[elastic_train.STOP :]  # the same global batches
        served = Counter(i for batch in head + _global_batches(per_rank) for i in batch)
        assert served == Counter(i for batch in want for i in batch)  # each draw exactly once
    assert len(np.unique([i for b in want for i in b])) < sum(map(len, want))  # draws repeat
