"""The stage contract: each stage declares what it consumes and produces before data flows.

A build's per-sample pipeline is a short chain of stages (decode -> resize, or decode ->
augment). :func:`check_chain` validates the chain against the store layout when
:func:`precompute.stages.make_pipeline` builds it, which each shard task does before its first
sample, so a mis-ordered or mis-sized pipeline fails before any sample is decoded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from precompute.errors import SpecError

__all__ = ["Port", "SampleContext", "Stage", "check_chain"]


@dataclass(frozen=True)
class Port:
    """What flows between stages.

    Attributes:
        kind: ``"bytes"`` (encoded file), ``"image"`` (a Pillow RGB image of any size) or
            ``"pixels"`` (a numpy array plus its extent).
        shape: Array shape for ``pixels`` (``None`` entries are free), ``()`` otherwise.
        dtype: Numpy dtype name for ``pixels``, ``""`` otherwise.
    """

    kind: str
    shape: tuple[int | None, ...] = ()
    dtype: str = ""


@dataclass(frozen=True)
class SampleContext:
    """Per-sample facts a stage may need: its source key, store slot and the build seed."""

    key: str
    slot: int
    seed: int


class Stage(ABC):
    """One transform. Subclasses set ``name`` and ``consumes`` and implement the rest."""

    name: ClassVar[str]
    consumes: ClassVar[Port]

    @abstractmethod
    def produces(self) -> Port:
        """Return the output port (shape and dtype of what :meth:`__call__` returns)."""

    @abstractmethod
    def __call__(self, value: Any, ctx: SampleContext) -> Any:
        """Transform one sample's value."""


def check_chain(stages: Sequence[Stage], final: Port) -> None:
    """Check that each stage consumes what the previous one produces and the end is ``final``.

    Raises:
        SpecError: The chain is mis-ordered or produces the wrong shape or dtype.
    """
    current = Port("bytes")
    for stage in stages:
        if stage.consumes.kind != current.kind:
            raise SpecError(
                f"stage {stage.name!r} consumes {stage.consumes.kind!r} but receives "
                f"{current.kind!r}; the pipeline is mis-ordered"
            )
        current = stage.produces()
    if current != final:
        raise SpecError(f"pipeline produces {current}, the store layout wants {final}")
