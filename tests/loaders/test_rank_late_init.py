"""A loader made before ``init_process_group`` (``mp.spawn``, no torchrun env) must not serve.

It took itself for rank 0 of 1, so every process would train on every sample. Two real gloo
processes on 127.0.0.1: the early loader refuses naming both ranks; one made after the group
exists serves this rank's disjoint half.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from loaders import StoreLoader
from loaders.errors import LoaderError
from tests.contracts.loader_contract import make_index_store
from tests.servers import free_port

WORLD = 2


def _run(rank: int, store: str, out: str, port: int) -> None:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        os.environ.pop(key, None)
    early = StoreLoader(store, 4, seed=0, augment=None)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        try:
            next(iter(early))
            refused = ""
        except LoaderError as exc:
            refused = str(exc)
        late = StoreLoader(store, 4, seed=0, augment=None)
        served = [i for b in late for i in b["index"][~b["is_pad"]].tolist()]
        Path(out, f"{rank}.json").write_text(json.dumps({"refused": refused, "served": served}))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_a_loader_made_before_the_process_group_refuses_to_serve(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "store", 40)
    mp.spawn(_run, args=(str(store), str(tmp_path), free_port()), nprocs=WORLD, join=True)
    seen = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(WORLD)]
    for rank, got in enumerate(seen):
        assert (
            f"made as rank 0 of 1, but torch.distributed now says rank {rank} of 2"
            in (got["refused"])
        )
    assert not set(seen[0]["served"]) & set(seen[1]["served"])
    assert sorted(seen[0]["served"] + seen[1]["served"]) == list(range(40))
