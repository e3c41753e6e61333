"""StoreLoader under a real torch.distributed (gloo) process group of two ranks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from loaders import StoreLoader
from tests.contracts.loader_contract import collect, make_index_store
from tests.servers import free_port


def _worker(rank: int, world: int, port: int, store: str, out: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        loader = StoreLoader(store, 4, seed=7)  # rank and world size from torch.distributed
        loader.set_epoch(1)
        batches = collect(loader)
        count = torch.tensor([len(batches)])
        dist.all_reduce(count, op=dist.ReduceOp.MAX)  # a DDP step would hang if they differed
        index = np.concatenate([b["index"] for b in batches])
        np.save(Path(out) / f"rank{rank}.npy", index)
        np.save(
            Path(out) / f"meta{rank}.npy",
            np.array([loader.rank, loader.world_size, len(batches), int(count)]),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_ranks_from_torch_distributed(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 75, holes=(4, 9))
    mp.spawn(_worker, args=(2, free_port(), str(store), str(tmp_path)), nprocs=2, join=True)
    got = [np.load(tmp_path / f"rank{r}.npy") for r in range(2)]
    meta = [np.load(tmp_path / f"meta{r}.npy").tolist() for r in range(2)]
    assert [m[:2] for m in meta] == [[0, 2], [1, 2]]
    assert meta[0][2] == meta[1][2] == meta[0][3]  # same batch count on both ranks
    assert not set(got[0].tolist()) & set(got[1].tolist())
    for rank in range(2):
        explicit = StoreLoader(store, 4, seed=7, rank=rank, world_size=2)
        explicit.set_epoch(1)
        np.testing.assert_array_equal(
            got[rank], np.concatenate([b["index"] for b in collect(explicit)])
        )
