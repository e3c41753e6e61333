"""The README's DDP example as a script: ``torchrun --nproc-per-node 4 ddp_train.py ...``.

Run by ``tests/loaders/test_torchrun.py`` with gloo on the CPU. ``train`` serves epoch 0 with
a DDP step per batch (its gradient all-reduce hangs if one rank has fewer batches), then a
validation pass whose metric is all-reduced, then ``stop_after`` batches of epoch 1; every
rank saves its loader's ``state_dict`` and the job is killed (SIGKILL). ``resume`` loads each
rank's state and serves the rest of epoch 1. Each rank writes what it saw to ``OUT/MODE-RANK.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from loaders import StoreLoader

SEED, BATCH, CLASSES = 11, 8, 7


def guess(images: torch.Tensor) -> torch.Tensor:
    """A fixed "model" for the validation metric: reads the index the pixels encode."""
    index = images[:, 0, 0, 0].long() + 256 * images[:, 0, 0, 1].long()
    return torch.where(index % 3 == 0, 0, index % CLASSES)


def train_epoch(
    loader: StoreLoader, model: torch.nn.Module, opt: torch.optim.Optimizer, stop: int | None = None
) -> list[list[int]]:
    """Serve (up to ``stop`` batches of) the loader's epoch with one DDP step per batch."""
    seen = []
    for batch in loader:
        features = batch["image"].float().mean(dim=(1, 2)) / 255
        loss = torch.nn.functional.cross_entropy(model(features), batch["label"])
        opt.zero_grad()
        loss.backward()  # all-reduces the gradients across ranks
        opt.step()
        seen.append(batch["index"].tolist())
        if len(seen) == stop:
            break
    return seen


def validate(store: str) -> dict[str, Any]:
    """A validation pass: every sample once across ranks, repeats marked ``is_pad``."""
    val = StoreLoader(store, BATCH, shuffle=False, drop_last=False, prefetch=0)
    counts, index, pad = torch.zeros(2, dtype=torch.int64), [], []
    for b in val:
        keep = ~b["is_pad"]
        counts += torch.stack([(guess(b["image"]) == b["label"])[keep].sum(), keep.sum()])
        index += b["index"].tolist()
        pad += b["is_pad"].tolist()
    dist.all_reduce(counts)
    return {"counts": counts.tolist(), "index": index, "is_pad": pad}


def main(store: str, out: Path, mode: str, stop_after: int) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # a hang fails, in time
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(3, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = StoreLoader(store, BATCH, seed=SEED, prefetch=0)  # rank, world from torch.distributed
    seen: dict[str, Any] = {"rank": loader.rank, "world_size": loader.world_size}
    if mode == "train":
        loader.set_epoch(0)
        seen["epoch0"] = train_epoch(loader, model, opt)
        seen["val"] = validate(store)
        seen["epoch1"] = train_epoch(loader, model, opt, stop=stop_after)
        torch.save(loader.state_dict(), out / f"state-{rank}.pt")
    else:
        loader.load_state_dict(torch.load(out / f"state-{rank}.pt"))
        seen["epoch1"] = train_epoch(loader, model, opt)
    (out / f"{mode}-{rank}.json").write_text(json.dumps(seen))
    dist.barrier()
    if mode == "train":
        os.kill(os.getpid(), signal.SIGKILL)  # killed mid-epoch, after the checkpoint
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
