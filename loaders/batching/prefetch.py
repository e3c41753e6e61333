"""Run a node on a background thread with a bounded queue.

Items travel with the source's state after producing them, so :meth:`Prefetcher.get_state` is
the state after the last item the *consumer* received, not after what the thread ran ahead to.
Exceptions on the thread are carried back as values and re-raised on the consumer thread:
:class:`~loaders.errors.LoaderError` as is (it names the shard), anything else wrapped in
:class:`~loaders.errors.WorkerError`.

The bound is a second queue of free slots: the thread takes a slot before it hands an item
over and the consumer returns it. Both are ``queue.SimpleQueue`` (C, one lock hand-off per
call): ``queue.Queue``'s Python-level conditions cost several GIL hand-offs per item, which
a reader that keeps dropping the GIL for its copies pays on every batch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from loaders.batching.nodes import Node
from loaders.errors import LoaderError, WorkerError

__all__ = ["Prefetcher"]

T = TypeVar("T")
_ITEM, _END, _ERROR = "item", "end", "error"
_POLL_S = 0.1


class Prefetcher(Node[T]):
    """Produce up to ``depth`` items of ``source`` ahead, on one daemon thread.

    Args:
        source: The node to run in the background.
        depth: Queue bound: at most this many finished items wait for the consumer.
        name: Thread name, used in error messages.
    """

    def __init__(self, source: Node[T], depth: int = 2, name: str = "nostall-prefetch") -> None:
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self.source, self.depth, self.name = source, depth, name
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._items: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()
        self._free: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._state: dict[str, Any] = {}
        self._done = False

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Stop the thread, reset the source to ``state`` and start producing again."""
        self._halt()
        self.source.reset(state)
        self._state = self.source.get_state()
        self._stop, self._done = threading.Event(), False
        self._items, self._free = queue.SimpleQueue(), queue.SimpleQueue()
        for _ in range(self.depth):
            self._free.put(None)
        self._thread = threading.Thread(
            target=self._run,
            args=(self._items, self._free, self._stop),
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def _run(
        self,
        items: queue.SimpleQueue[tuple[str, Any, Any]],
        free: queue.SimpleQueue[None],
        stop: threading.Event,
    ) -> None:
        try:
            while not stop.is_set():
                try:
                    item = self.source.next()
                except StopIteration:
                    items.put((_END, None, None))
                    return
                state = self.source.get_state()
                if not self._slot(free, stop):
                    return
                items.put((_ITEM, item, state))
        except BaseException as exc:  # carried to the consumer, re-raised there
            items.put((_ERROR, exc, None))

    @staticmethod
    def _slot(free: queue.SimpleQueue[None], stop: threading.Event) -> bool:
        """Wait for a free slot; False once ``stop`` is set."""
        while not stop.is_set():
            try:
                free.get(timeout=_POLL_S)
                return not stop.is_set()
            except queue.Empty:
                continue
        return False

    def next(self) -> T:
        """Return the next item produced in the background; re-raise its errors here."""
        if self._thread is None:
            self.reset()
        if self._done:
            raise StopIteration
        kind, value, state = self._get()
        if kind == _ITEM:
            self._free.put(None)
            self._state = state
            return value  # type: ignore[no-any-return]
        self._done = True
        if kind == _END:
            raise StopIteration
        if isinstance(value, LoaderError):
            raise value
        raise WorkerError(f"{self.name} thread failed: {value!r}") from value

    def _get(self) -> tuple[str, Any, Any]:
        while True:
            try:
                return self._items.get(timeout=_POLL_S)
            except queue.Empty:
                dead = self._thread is None or not self._thread.is_alive()
                if dead and self._items.empty():
                    raise WorkerError(f"{self.name} thread died without a result") from None

    def get_state(self) -> dict[str, Any]:
        """Return the source's state after the last item delivered to the consumer."""
        return dict(self._state)

    def _halt(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._free.put(None)  # wake a thread waiting for a slot: it sees the stop and ends
        self._thread.join()
        self._thread = None
        # drop undelivered items (their buffers go back); by type, not by the module's name,
        # which is gone when a generator left open is closed as the interpreter finalizes
        self._items = type(self._items)()

    def close(self) -> None:
        """Stop the background thread and close the source."""
        self._halt()
        self.source.close()
