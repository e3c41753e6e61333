"""The strategy registry: each data-loading strategy is a small adapter behind one base class.

A strategy turns a :class:`RunConfig` into an :class:`EpochSource`: something that yields
training-ready batches ``(inputs, targets)`` on the device for one epoch at a time. What a
batch holds is the run's workload's (:mod:`benchmarks.harness.workloads`: normalised image
crops and labels, image crops and masks, log-mel crops and labels, ...), and every strategy
does the same work per sample for it, so their throughput is comparable. A strategy whose
backend is missing says so through :meth:`Strategy.unavailable` (``unavailable: <reason>``);
one that cannot take the run's kind of data raises :class:`~benchmarks.errors.NotApplicable`
when opened (``not applicable: <reason>``).

| module | strategies |
| --- | --- |
| ``workers.py`` | ``workers``: the classic DataLoader of the workload's per-item transform |
| ``store.py`` | ``precompute`` (StoreLoader), ``precompute-dali``, ``tf-store`` (loaders.tf) |
| ``raw.py`` | ``gpu-decode`` (DALI), ``tf-native`` (tf.data), ``memmap``: the workload's own |
| ``epochs.py`` | the epoch sources the store and raw strategies share |
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Protocol

import torch

from benchmarks.errors import BenchConfigError, NotApplicable
from precompute.policy import IMAGENET_MEAN, IMAGENET_STD

__all__ = [
    "MEAN",
    "STD",
    "STRATEGIES",
    "Batch",
    "EpochSource",
    "RunConfig",
    "Strategy",
    "get_strategy",
    "register",
    "strategy_names",
    "to_device",
]

MEAN = IMAGENET_MEAN  # the normalisation every strategy applies: the one policy table's
STD = IMAGENET_STD
Batch = tuple[torch.Tensor, Any]  # (inputs, targets); targets: a tensor, or with labels a tuple


def to_device(value: Any, device: torch.device) -> Any:
    """A tensor, or a tuple of them (targets with carried labels), on ``device``.

    A DataLoader collates the tuple of an item's targets into a list: a tuple again here.
    """
    if isinstance(value, (tuple, list)):
        return tuple(to_device(v, device) for v in value)
    return value.to(device, non_blocking=True)


@dataclass(frozen=True)
class RunConfig:
    """What every strategy gets: the same data, batch size and output size.

    Attributes:
        data: Raw dataset, as ``precompute build`` takes it.
        store: Path of the precomputed store (None if no store strategy runs).
        batch_size: Samples per batch.
        workers: Worker processes/threads a strategy may use for loading.
        size: Output side of the training crops, or their frame ``"WxH"`` (the build spec's
            ``size``: ``--size 256x192``).
        seed: Seed of order and augmentation.
        device: Where batches must end up.
        store_reason: Why there is no store (shown by the strategies that need one).
        spec: The build spec of ``data`` (``precompute.spec.BuildSpec``: its fields, options,
            ``size``); None: ``BuildSpec(size=size, seed=seed)``.
        epochs: Epochs the run asks of each strategy (a loader serving several epochs from
            one iterator, ``tf-store``, is made for them).
        mixup: Mixup's Beta concentration (0: off): every strategy blends each batch with
            itself reversed and serves soft targets (the store loaders with their own mixup).
    """

    data: str
    store: str | None
    batch_size: int
    workers: int
    size: int | str
    seed: int = 0
    device: str = "cpu"
    store_reason: str | None = None
    spec: Any = None
    epochs: int = 1
    mixup: float = 0.0

    def __post_init__(self) -> None:
        from precompute.checks import check_size

        for name in ("batch_size", "epochs"):
            if getattr(self, name) < 1:
                raise BenchConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        size = check_size("size", self.size, 1, 8192, BenchConfigError)  # the build's check
        object.__setattr__(self, "size", size)  # canonical: a side, or "WxH" text
        if self.workers < 0:
            raise BenchConfigError(f"workers must be >= 0, got {self.workers!r}")
        if not 0.0 <= self.mixup <= 100.0:
            raise BenchConfigError(f"mixup must be in [0, 100], got {self.mixup!r}")

    @cached_property
    def plan(self) -> Any:
        """The listed source (:class:`benchmarks.harness.sources.SourcePlan`), listed once."""
        from benchmarks.harness.sources import plan_source
        from precompute.spec import BuildSpec

        return plan_source(self.data, self.spec or BuildSpec(size=self.size, seed=self.seed))

    @cached_property
    def workload(self) -> Any:
        """The run's :class:`~benchmarks.harness.workloads.Workload` (from the source's kinds)."""
        from benchmarks.harness.workloads import choose

        return choose(self.plan, self.mixup)

    @property
    def hw(self) -> tuple[int, int]:
        """``(height, width)`` of the output (:attr:`size`)."""
        from precompute.checks import size_hw

        return size_hw(self.size)

    def square(self, engine: str) -> int:
        """The output side, for ``engine``, which produces square outputs only.

        Raises:
            NotApplicable: The output is a ``WxH`` frame, naming it.
        """
        if isinstance(self.size, str):
            raise NotApplicable(
                f"{engine} produces square outputs only, and --size {self.size} is a "
                "WIDTHxHEIGHT frame"
            )
        return self.size

    @property
    def threads(self) -> int:
        """Loader threads of the strategies that use threads: ``workers``, at least 1."""
        return min(64, max(1, self.workers))


class EpochSource(Protocol):
    """What a strategy returns: batches per epoch, and how many samples an epoch has."""

    num_samples: int

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """Return an iterator over the batches of ``epoch``."""

    def close(self) -> None:
        """Release workers, pipelines and files."""


class Strategy(ABC):
    """One way to feed the training loop.

    Attributes:
        name: Registry name (used on the command line and in reports).
        needs_store: Whether the strategy reads the precomputed store.
        description: One line for the report.
        requires: ``module`` or ``module:attribute`` that must import.
    """

    name: ClassVar[str]
    needs_store: ClassVar[bool] = False
    description: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()

    def unavailable(self, cfg: RunConfig) -> str | None:
        """Return why the strategy cannot run here, or None if it can."""
        for need in self.requires:
            module, _, attr = need.partition(":")
            try:
                mod = importlib.import_module(module)
                if attr:
                    getattr(mod, attr)
            except Exception as exc:  # ImportError, or a backend failing at import time
                return f"{need} cannot be imported ({type(exc).__name__}: {exc})"
        if self.needs_store and not cfg.store:
            return f"no store: {cfg.store_reason or 'give --store or let the harness build one'}"
        return None

    @abstractmethod
    def open(self, cfg: RunConfig) -> EpochSource:
        """Set up the loader (not timed as throughput) and return it.

        Raises:
            NotApplicable: The strategy cannot take the run's kind of data, saying why.
        """

    def describe(self, cfg: RunConfig) -> str:
        """One line for the report: what runs, for the run's workload."""
        return self.description


STRATEGIES: dict[str, type[Strategy]] = {}
BUILTIN = ("workers", "store", "raw")


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: add a strategy to :data:`STRATEGIES` under ``cls.name``."""
    if cls.name in STRATEGIES:
        raise ValueError(f"strategy {cls.name!r} registered twice")
    STRATEGIES[cls.name] = cls
    return cls


def _load_builtin() -> None:
    for name in BUILTIN:
        importlib.import_module(f"benchmarks.harness.strategies.{name}")


def strategy_names() -> list[str]:
    """Return the registered strategy names."""
    _load_builtin()
    return list(STRATEGIES)


def get_strategy(name: str) -> Strategy:
    """Return a new instance of the strategy called ``name``."""
    _load_builtin()
    if name not in STRATEGIES:
        raise BenchConfigError(f"unknown strategy {name!r}; known: {sorted(STRATEGIES)}")
    return STRATEGIES[name]()
