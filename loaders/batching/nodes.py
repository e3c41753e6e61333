"""The smallest iterator-node base: ``next``, ``reset(state)``, ``get_state``, ``close``.

In the style of ``torchdata.nodes`` (without the dependency): a loader is a chain of nodes, each
owning a source node; ``reset(state)`` restores a node (and, through it, its sources) to a
state previously returned by ``get_state``, which is what makes exact mid-epoch resume cheap.
Nodes that run ahead of their consumer (a background thread, a device copy one batch early)
report the state after the last item *returned*, so ``StoreLoader`` takes the batch position
of its ``state_dict`` from the chain's ``get_state`` after each batch it hands out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["Node"]

T = TypeVar("T")


class Node(ABC, Generic[T]):
    """An iterator with explicit state.

    Subclasses implement :meth:`reset`, :meth:`next` and :meth:`get_state`; :meth:`close`
    releases threads or files and is called by the owner when the node is dropped.
    """

    @abstractmethod
    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Restart from ``state`` (a dict from :meth:`get_state`), or from the beginning."""

    @abstractmethod
    def next(self) -> T:
        """Return the next item, or raise ``StopIteration``."""

    @abstractmethod
    def get_state(self) -> dict[str, Any]:
        """Return a dict that :meth:`reset` accepts, positioned after the last item returned."""

    def close(self) -> None:
        """Release background resources (threads, pools); the default does nothing."""

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        return self.next()
