"""Epoch sources the strategies share: a nostall loader's, a ``tf.data`` dataset's, a callable's.

Each turns what a backend yields into the harness's ``(inputs, targets)`` torch batches on the
run's device: a loader's dict batches through the workload (:class:`LoaderSource`), TensorFlow
tensors as torch tensors over the same host memory (:class:`TfSource`), or batches a function
makes per epoch (:class:`FunctionSource`). A source may carry a ``note`` for the report (what
it served, what it left out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from benchmarks.errors import BenchmarkError
from benchmarks.harness.strategies import Batch

__all__ = ["FunctionSource", "LoaderSource", "MixedSource", "TfSource", "mix", "tf_to_torch"]


class LoaderSource:
    """Adapts a nostall loader (``set_epoch``, ``len``, dict batches) to an epoch source.

    Args:
        loader: The loader (``StoreLoader``, a DALI loader).
        num_samples: Samples an epoch covers.
        split: ``split(batch) -> (inputs, targets)``; default ``(image, label)``.
        note: A line for the report, or None.
    """

    def __init__(
        self,
        loader: Any,
        num_samples: int,
        split: Callable[[Any], Batch] | None = None,
        note: str | None = None,
    ) -> None:
        self.loader = loader
        self.num_samples = num_samples
        self.split = split or (lambda b: (b["image"], b["label"]))
        self.note = note
        self.mixes = False  # whether the loader mixes (--mixup) itself

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The ``(inputs, targets)`` batches of ``epoch``."""
        self.loader.set_epoch(epoch)
        for batch in self.loader:
            yield self.split(batch)

    def close(self) -> None:
        """Close the loader (once)."""
        close = getattr(self.loader, "close", None)
        if callable(close):
            close()
        self.loader = None


def tf_to_torch(value: Any, device: torch.device) -> torch.Tensor:
    """A TensorFlow host tensor as a torch tensor on ``device`` (a view of it on the CPU)."""
    array = np.asarray(value)
    tensor = torch.from_numpy(array if array.flags.writeable else array.copy())
    return tensor.to(device, non_blocking=True)


class TfSource:
    """The batches of a ``tf.data`` pipeline as torch tensors on the run's device.

    Args:
        make: ``make(epoch) -> iterator`` over ``(x, y)`` TensorFlow batches of that epoch.
        num_samples: Samples an epoch covers.
        device: The run's device.
        note: A line for the report, or None.
        loader: What the diagnosis reads the settings of (the dataset), or None.
        culprit: Called when the pipeline fails: ``PATH: ERROR`` of the file it failed on
            (TensorFlow's op errors do not name it), or None.
        split: ``split(batch dict) -> (inputs, targets)`` for a pipeline whose elements are
            dicts (the store's batch, labels carried); None: elements are ``(x, y)``.
    """

    def __init__(
        self,
        make: Callable[[int], Iterator[Any]],
        num_samples: int,
        device: torch.device,
        note: str | None = None,
        loader: Any = None,
        culprit: Callable[[], str | None] | None = None,
        split: Callable[[Any], Batch] | None = None,
    ) -> None:
        self.make, self.num_samples, self.device = make, num_samples, device
        self.note, self.loader, self.culprit, self.split = note, loader, culprit, split
        self.mixes = False  # whether the loader mixes (--mixup) itself

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The ``(inputs, targets)`` batches of ``epoch``, converted as they come.

        Raises:
            BenchmarkError: The pipeline failed on a file, naming it and the error.
        """
        try:
            for element in self.make(epoch):
                if self.split is not None:
                    yield self.split({k: tf_to_torch(v, self.device) for k, v in element.items()})
                    continue
                x, y = element
                yield tf_to_torch(x, self.device), tf_to_torch(y, self.device)
        except Exception as exc:
            found = self.culprit() if self.culprit is not None else None
            if found is None:
                raise
            raise BenchmarkError(found) from exc

    def close(self) -> None:
        """Drop the pipeline."""
        self.make = lambda epoch: iter(())
        self.loader = None


class FunctionSource:
    """Batches a function makes per epoch (a reader on the training thread).

    Args:
        make: ``make(epoch) -> iterator`` over ``(inputs, targets)`` torch batches.
        num_samples: Samples an epoch covers.
        note: A line for the report, or None.
        close: Called once at :meth:`close`, or None.
    """

    def __init__(
        self,
        make: Callable[[int], Iterator[Batch]],
        num_samples: int,
        note: str | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.make, self.num_samples, self.note, self._close = make, num_samples, note, close

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of ``epoch``."""
        return self.make(epoch)

    def close(self) -> None:
        """Release what the function holds."""
        if self._close is not None:
            self._close()
            self._close = None


def mix(
    x: torch.Tensor, y: torch.Tensor, alpha: float, classes: int, rng: np.random.Generator
) -> Batch:
    """Mixup of a batch: sample ``i`` blended with ``B - 1 - i`` by one Beta(alpha) lambda.

    The targets become soft (``[B, classes]``), blended by the same lambda: what
    ``loaders.augment.Mixup`` (without cutmix or smoothing) and ``AudioAugment``'s mixup do.
    """
    lam = float(rng.beta(alpha, alpha))
    soft = torch.nn.functional.one_hot(y.long(), classes).to(torch.float32)
    return torch.lerp(x.flip(0), x, lam), torch.lerp(soft.flip(0), soft, lam)


class MixedSource:
    """An epoch source whose batches are mixed on the device (``--mixup``).

    As a training loop mixes a DataLoader's batches: for the strategies whose loader has no
    mixup of its own.

    Args:
        source: The epoch source.
        alpha: Mixup's Beta concentration.
        classes: Classes of the soft targets.
        seed: Seed of the lambdas (one per batch, from ``(seed, epoch, batch)``).
    """

    def __init__(self, source: Any, alpha: float, classes: int, seed: int) -> None:
        self.source, self.alpha, self.classes, self.seed = source, alpha, classes, seed
        self.num_samples = source.num_samples
        self.note = getattr(source, "note", None)
        self.loader = getattr(source, "loader", source)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The source's batches of ``epoch``, mixed."""
        for b, (x, y) in enumerate(self.source.epoch(epoch)):
            rng = np.random.default_rng([self.seed, 0x4D, epoch, b])
            yield mix(x, y, self.alpha, self.classes, rng)

    def close(self) -> None:
        """Close the source."""
        self.source.close()
