"""A DDP job stopped mid-epoch and resumed on another number of ranks (``torchrun``, gloo, CPU).

``train`` (4 ranks, batches of 6: a global batch of 24) takes ``STOP`` batches of epoch 0 with
a DDP step each, class-balanced; rank 0 saves its loader's state (what Lightning writes) and
the job is killed (SIGKILL). ``resume`` (any number of ranks, ``batch_size = 24 / ranks``)
loads rank 0's state and serves the rest of the epoch. Each rank writes the sample indices of
every batch it served to ``OUT/MODE-WORLD-RANK.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from loaders import StoreLoader

SEED, GLOBAL_BATCH, STOP = 5, 24, 3


def make_loader(store: str, world: int, rank: int | None = None) -> StoreLoader:
    """The job's loader: class-balanced draws, the global batch kept whatever the world size.

    Rank and world size come from torch.distributed, or ``rank`` of ``world`` when given.
    """
    ranks = {} if rank is None else {"rank": rank, "world_size": world}
    return StoreLoader(
        store, GLOBAL_BATCH // world, seed=SEED, prefetch=0, balance="label", **ranks
    )


def main(store: str, out: Path, mode: str) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # a hang fails, in time
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(torch.nn.Linear(3, 7))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(store, world)
    if mode == "resume":
        loader.load_state_dict(torch.load(out / "state.pt"))
    seen = []
    for batch in loader:
        loss = torch.nn.functional.cross_entropy(
            model(batch["image"].float().mean(dim=(1, 2))), batch["label"]
        )
        opt.zero_grad()
        loss.backward()  # all-reduces: hangs if one rank has fewer batches
        opt.step()
        seen.append(batch["index"].tolist())
        if mode == "train" and len(seen) == STOP:
            break
    if mode == "train" and rank == 0:
        torch.save(loader.state_dict(), out / "state.pt")
    (out / f"{mode}-{world}-{rank}.json").write_text(json.dumps(seen))
    dist.barrier()
    if mode == "train":
        os.kill(os.getpid(), signal.SIGKILL)  # killed mid-epoch, after the checkpoint
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3])
