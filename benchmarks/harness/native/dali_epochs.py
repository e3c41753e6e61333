"""A DALI graph per epoch, fed from Python, as an epoch source of ``(inputs, targets)``.

The feeder gives one batch of per-sample inputs per call (file bytes read on the training
thread, and the augmentation's random draws made on the host, so the graph is deterministic)
and ends the epoch by raising ``StopIteration`` (``cycle="raise"``), as the DALI loaders of
:mod:`loaders.dali` do. Without CUDA the graph runs on DALI's CPU threads (``device_id=None``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = ["DaliEpochs", "device_id", "host_labels"]


def device_id(device: torch.device) -> int | None:
    """DALI's ``device_id`` for ``device``: None for a CPU-only graph."""
    from loaders.dali._compat import dali_device_id

    return dali_device_id(device)


def host_labels(tensor_list: Any, device: torch.device) -> torch.Tensor:
    """A graph's per-sample labels (a CPU output: they never leave the host) on ``device``.

    Through numpy: DALI copies a CPU output only into host memory, never straight into a
    CUDA tensor.
    """
    import numpy as np

    return torch.from_numpy(np.array(tensor_list.as_tensor())).view(-1).to(device)


class _Once:
    """An iterable over one epoch's feeder (DALI's ``cycle="raise"`` takes no generator)."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Any]:
        return self.batches


class DaliEpochs:
    """Batches of a DALI graph, built anew each epoch over that epoch's feeder.

    Args:
        build: ``build(feeder) -> built pipeline`` whose outputs ``finish`` takes.
        feeder: ``feeder(epoch) -> iterator`` of per-batch input tuples.
        finish: ``finish(outputs, device) -> (inputs, targets)`` torch tensors.
        num_samples: Samples an epoch covers.
        device: The run's device.
        note: A line for the report, or None.
    """

    def __init__(
        self,
        build: Callable[[Iterable[Any]], Any],
        feeder: Callable[[int], Iterator[Any]],
        finish: Callable[[Any, torch.device], tuple[torch.Tensor, Any]],
        num_samples: int,
        device: torch.device,
        note: str | None = None,
    ) -> None:
        self.build, self.feeder, self.finish = build, feeder, finish
        self.num_samples, self.device, self.note = num_samples, device, note
        self.pipe: Any = None

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, Any]]:
        """The batches of ``epoch``."""
        self.pipe = self.build(_Once(self.feeder(epoch)))
        while True:
            try:
                outs = self.pipe.run()
            except StopIteration:
                return
            yield self.finish(outs, self.device)

    def close(self) -> None:
        """Drop the pipeline."""
        self.pipe = None
