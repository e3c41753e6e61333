"""What every loader of the contract shares: ranks, device, the resume check, ``is_pad``.

``StoreLoader`` and the DALI loaders (``loaders.dali``) call these, so the rules are written
once: where rank and world size come from, which device a loader pins, which saved states
it resumes, and how a batch marks the repeats that even out the ranks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from loaders.errors import DeviceUnavailableError, LoaderError

__all__ = ["check_state", "pad_flags", "resolve_device", "resolve_rank"]


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Return (rank, world_size): from the arguments, else torch.distributed, else torchrun env.

    Raises:
        ValueError: Only one of the two given, or rank outside ``[0, world_size)``.
    """
    if (rank is None) != (world_size is None):
        raise ValueError(f"give both rank and world_size or neither, got {rank=} {world_size=}")
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            rank = int(os.environ.get("RANK", 0))
            world_size = int(os.environ.get("WORLD_SIZE", 1))
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    return rank, world_size


def check_state(state: Mapping[str, Any], mine: Mapping[str, Any]) -> None:
    """Refuse a saved loader state whose settings differ from ``mine`` (the keys of ``mine``).

    ``rank`` is not among them: ranks step together, so every rank is at the same epoch and
    batch, and a checkpoint written by rank 0 alone resumes every rank.

    Raises:
        LoaderError: Naming every differing setting, (saved, current); for another world
            size, why it cannot resume.
    """
    diff = {k: (state.get(k), v) for k, v in mine.items() if state.get(k) != v}
    if not diff:
        return
    hint = ""
    if "world_size" in diff:
        hint = (
            "; saved with another world size, whose rank shards hold other samples: "
            "start the epoch afresh with set_epoch() instead"
        )
    raise LoaderError(f"state does not match this loader (saved, current): {diff}{hint}")


def pad_flags(index: torch.Tensor, repeats: torch.Tensor) -> torch.Tensor:
    """Return a batch's ``is_pad``: True where ``index`` is one of the rank's padding repeats.

    A rank serves each sample at most once in an epoch, real or repeat, so a repeat is known
    by its index (``repeats``: :attr:`loaders.plan.EpochPlan.repeats`, on ``index``'s device).
    """
    if len(repeats) == 0:
        return torch.zeros(index.shape, dtype=torch.bool, device=index.device)
    return torch.isin(index, repeats)


def resolve_device(device: str | torch.device) -> torch.device:
    """Return ``device`` with a CUDA index pinned now (``"cuda"`` -> the current GPU).

    Pinning at construction keeps every later allocation, copy and generator on the GPU that
    was current when the loader was built, even if the caller switches devices afterwards.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"device {device!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev
