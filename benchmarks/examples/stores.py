"""What the examples share: work folder, builds on one Ray, the Trainer, its device, conv block."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precompute.spec import BuildSpec

if TYPE_CHECKING:
    import lightning as L
    import torch
    from torch import nn

__all__ = [
    "add_common_args",
    "build_stores",
    "conv_block",
    "trainer",
    "trainer_device",
    "work_folder",
]


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--quick``, ``--work``, ``--epochs`` and ``--seed`` to an example's parser."""
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    parser.add_argument(
        "--work",
        type=Path,
        help="folder for the data and stores (default: tmp); a run with the same settings "
        "reuses its stores (fingerprinted by content), other settings need another folder",
    )
    parser.add_argument("--epochs", type=int, help="training epochs (default: per example)")
    parser.add_argument("--seed", type=int, default=0, help="data, order and augmentation seed")


@contextmanager
def work_folder(work: Path | None) -> Iterator[Path]:
    """Yield ``work`` (created), or a temporary folder removed afterwards."""
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
        yield work
        return
    with tempfile.TemporaryDirectory(prefix="nostall-example-") as tmp:
        yield Path(tmp)


def build_stores(jobs: Sequence[tuple[str, Path, BuildSpec]]) -> list[Path]:
    """Build each ``(source, out, spec)`` with ``precompute.job.build`` on one local Ray.

    A Ray already running in this process is used (and left running); else one is started
    for these builds and stopped after them.
    """
    import ray

    from precompute import job  # lazy: imports Ray
    from precompute.runtime.raylocal import start_local_ray

    local = None if ray.is_initialized() else start_local_ray(num_cpus=2)
    try:
        for src, out, spec in jobs:
            job.build(src, str(out), spec, progress=False, content_hash=True)
    finally:
        if local is not None:
            local.stop()
    return [out for _, out, _ in jobs]


def trainer(epochs: int, **options: Any) -> Any:
    """A CPU ``lightning.Trainer`` for a ``StoreLoader`` DataModule (no sampler, no logger).

    ``options``: more ``Trainer`` arguments (``callbacks``, ``devices``, ``strategy``, ...),
    over these defaults.
    """
    import lightning as L  # lazy: only the examples need Lightning

    defaults: dict[str, Any] = {
        "accelerator": "cpu",
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "use_distributed_sampler": False,  # the loader shards by rank itself
        "num_sanity_val_steps": 0,
    }
    return L.Trainer(max_epochs=epochs, **{**defaults, **options})


def trainer_device(data: L.LightningDataModule) -> torch.device:
    """The device of the trainer ``data`` is attached to (where its loaders put batches)."""
    if data.trainer is None:
        raise RuntimeError("the DataModule's loaders are made by a Trainer (trainer.fit)")
    return data.trainer.strategy.root_device


def conv_block(cin: int, cout: int) -> nn.Sequential:
    """Two 3x3 convolutions, each with batch norm and ReLU: ``cin -> cout`` channels."""
    from torch import nn  # lazy: only the examples' nets need torch.nn

    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )  # fmt: skip
