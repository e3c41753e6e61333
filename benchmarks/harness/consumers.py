"""What the training loop does with each batch: nothing, a fixed cost, or a real model step.

The model step trains the run's workload's own small network (a CNN for images, a U-Net for
masks, a 1-D or 2-D net for audio, ...: :mod:`benchmarks.harness.workloads.nets`).

Every consumer returns only when its work is finished (on CUDA it synchronises), so the time
between receiving a batch and the consumer returning is the step's compute time.

The training thread's torch pool (:class:`TorchThreads`): torch's default pool is one thread
per core. Beside loader threads (StoreLoader's readers) or worker processes that already take
the cores, every small torch op of the training thread (a store loader's augmentation on the
CPU, the model step) wakes a pool that has no core to run on, and waits for it: on a busy
2-core host a row ran 10-20 times slower with the default than with one thread, which
inverted the ranking of the strategies. So the harness sizes the pool to the cores the
loaders leave: ``max(1, usable cores - loader workers/threads)``, which is 1 whenever the
loaders get every core (the default ``--workers``). ``--torch-threads N`` sets it instead; a
pool larger than the cores left is named in the report as a possible slowdown. The pool is
set for the run and restored after it (:func:`torch_threads_of`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from benchmarks.errors import BenchConfigError

__all__ = [
    "Consumer",
    "FixedCost",
    "ModelStep",
    "NoConsumer",
    "TinyCNN",
    "TorchThreads",
    "parse_consumer",
    "torch_threads_of",
]

Consumer = Callable[[torch.Tensor, Any], None]  # (inputs, targets: a tensor or a tuple)


class NoConsumer:
    """Loader only: the batch is dropped (on CUDA, once its queued kernels have finished).

    Args:
        device: The training device.
    """

    name = "none"

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = device

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Wait for the batch to be ready (CUDA: on-device augmentation is asynchronous)."""
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class FixedCost:
    """A fixed compute cost per step.

    On CUDA the GPU spins (``torch.cuda._sleep``) while the host is free, like a real step; on
    CPU the host sleeps for the same reason (an accelerator step does not use host cores).

    Args:
        ms: Milliseconds per step.
        device: The training device.
    """

    def __init__(self, ms: float, device: torch.device) -> None:
        if ms < 0:
            raise BenchConfigError(f"consumer fixed:<ms> needs ms >= 0, got {ms!r}")
        self.name = f"fixed:{ms:g}"
        self.seconds = ms / 1000.0
        self.device = device
        self._cycles = _cycles_per_second(device) * self.seconds if device.type == "cuda" else 0

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Spend the fixed cost."""
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                torch.cuda._sleep(int(self._cycles))
                torch.cuda.synchronize(self.device)
        else:
            time.sleep(self.seconds)


def _cycles_per_second(device: torch.device) -> float:
    """Calibrate ``torch.cuda._sleep`` cycles per second on ``device``."""
    with torch.cuda.device(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # warm-up
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize(device)
        return float(cycles / (start.elapsed_time(end) / 1000.0))


class TinyCNN(nn.Module):
    """A small convolutional classifier: three strided conv blocks, pooling, a linear head."""

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(3, w, 3, stride=2, padding=1),
            nn.BatchNorm2d(w),
            nn.ReLU(inplace=True),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
            nn.BatchNorm2d(2 * w),
            nn.ReLU(True),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1),
            nn.BatchNorm2d(4 * w),
            nn.ReLU(True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits for a float NCHW batch."""
        out: torch.Tensor = self.head(torch.flatten(self.features(x), 1))
        return out


class ModelStep:
    """One real training step: forward, loss, backward, SGD; AMP on CUDA.

    Args:
        num_classes: Output classes of the default network (:class:`TinyCNN`, cross-entropy).
        device: The training device.
        net: A network and its loss ``(model, loss(output, targets))`` instead (a workload's:
            a U-Net for masks, a 1-D or 2-D net for audio, ...; with carried labels the
            network returns a tuple of outputs and the targets are a tuple).
    """

    name = "model"

    def __init__(
        self,
        num_classes: int,
        device: torch.device,
        net: tuple[nn.Module, Callable[[Any, Any], torch.Tensor]] | None = None,
    ) -> None:
        self.device = device
        model, loss = net or (TinyCNN(num_classes), nn.functional.cross_entropy)
        self.loss: Callable[[Any, Any], torch.Tensor] = loss
        self.model = model.to(device)
        if device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.amp = device.type == "cuda"
        bf16 = self.amp and torch.cuda.is_bf16_supported()
        self.dtype = torch.bfloat16 if bf16 else torch.float16
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp and self.dtype == torch.float16)
        self.last_loss: float | None = None

    def __call__(self, inputs: torch.Tensor, targets: Any) -> None:
        """Train on one batch and wait for it to finish."""
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.amp):
            out = self.model(inputs.float())
        out = tuple(o.float() for o in out) if isinstance(out, tuple) else out.float()
        loss = self.loss(out, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.last_loss = float(loss.detach())


def parse_consumer(
    text: str, device: torch.device, num_classes: int, workload: Any = None
) -> Consumer:
    """Parse ``none``, ``fixed:<ms>`` or ``model`` into a consumer.

    ``model`` trains the ``workload``'s network (:meth:`Workload.model
    <benchmarks.harness.workloads.Workload.model>`), else :class:`TinyCNN` on ``num_classes``.

    Raises:
        BenchConfigError: Any other text, naming it.
    """
    if text == "none":
        return NoConsumer(device)
    if text == "model":
        net = workload.consumer_model() if workload is not None else None
        return ModelStep(num_classes, device, net)
    if text.startswith("fixed:"):
        try:
            ms = float(text.split(":", 1)[1])
        except ValueError as exc:
            raise BenchConfigError(f"--consumer {text!r}: ms must be a number") from exc
        return FixedCost(ms, device)
    raise BenchConfigError(f"--consumer {text!r}: use none, fixed:<ms> or model")


@dataclass(frozen=True)
class TorchThreads:
    """The training thread's torch pool for a run.

    Attributes:
        threads: Intra-op threads.
        given: Whether ``--torch-threads`` set it (else the default policy).
        cores: Usable cores.
        loaders: Loader workers/threads (``--workers``).
    """

    threads: int
    given: bool
    cores: int
    loaders: int

    @classmethod
    def choose(cls, given: int | None, cores: int, loaders: int) -> TorchThreads:
        """``given`` (``--torch-threads``), or the cores the loaders leave, at least 1."""
        if given is not None:
            return cls(int(given), True, cores, loaders)
        return cls(max(1, cores - loaders), False, cores, loaders)

    @property
    def text(self) -> str:
        """How the pool was chosen, for the report."""
        if self.given:
            return f"--torch-threads {self.threads}"
        return (
            f"default: the {self.cores} usable cores less the {self.loaders} loader "
            "workers/threads, at least 1"
        )

    @property
    def oversubscribed(self) -> bool:
        """Whether the pool is larger than the cores the loaders leave it."""
        return self.threads > max(1, self.cores - self.loaders)

    def caveat(self) -> str | None:
        """What a pool larger than the cores left may do to the rows (None: it is not)."""
        if not self.oversubscribed:
            return None
        return (
            f"torch ran {self.threads} intra-op threads on the training thread beside "
            f"{self.loaders} loader workers/threads on {self.cores} cores: a row whose "
            "training thread runs torch ops (a store loader's augmentation on the CPU, the "
            "model step) may be slowed by waiting for them, not only by other processes or "
            "the model; rerun with `--torch-threads 1` (the default here would be "
            f"{max(1, self.cores - self.loaders)}) to check."
        )


@contextmanager
def torch_threads_of(threads: int) -> Iterator[None]:
    """Run torch's intra-op pool at ``threads`` while inside; restore its size after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
