"""Run a node on a background thread with a bounded queue.

Items travel with the source's state after producing them, so :meth:`Prefetcher.get_state` is
the state after the last item the *consumer* received, not after what the thread ran ahead to.
Exceptions on the thread are carried back as values and re-raised on the consumer thread:
:class:`~loaders.errors.LoaderError` as is (it names the shard), anything else wrapped in
:class:`~loaders.errors.WorkerError`.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from loaders.errors import LoaderError, WorkerError
from loaders.nodes import Node

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
        self._queue: queue.Queue[tuple[str, Any, Any]] = queue.Queue(depth)
        self._state: dict[str, Any] = {}
        self._done = False

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Stop the thread, reset the source to ``state`` and start producing again."""
        self._halt()
        self.source.reset(state)
        self._state = self.source.get_state()
        self._stop, self._done = threading.Event(), False
        self._queue = queue.Queue(self.depth)
        self._thread = threading.Thread(target=self._run, args=(self._queue, self._stop),
                                        name=self.name, daemon=True)
        self._thread.start()

    def _run(self, out: queue.Queue[tuple[str, Any, Any]], stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    item = self.source.next()
                except StopIteration:
                    self._put(out, stop, (_END, None, None))
                    return
                self._put(out, stop, (_ITEM, item, self.source.get_state()))
        except BaseException as exc:  # carried to the consumer, re-raised there
            self._put(out, stop, (_ERROR, exc, None))

    @staticmethod
    def _put(out: queue.Queue[tuple[str, Any, Any]], stop: threading.Event,
             msg: tuple[str, Any, Any]) -> None:
        while not stop.is_set():
            try:
                out.put(msg, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def next(self) -> T:
        """Return the next item produced in the background; re-raise its errors here."""
        if self._thread is None:
            self.reset()
        if self._done:
            raise StopIteration
        kind, value, state = self._get()
        if kind == _ITEM:
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
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                dead = self._thread is None or not self._thread.is_alive()
                if dead and self._queue.empty():
                    raise WorkerError(f"{self.name} thread died without a result") from None

    def get_state(self) -> dict[str, Any]:
        """Return the source's state after the last item delivered to the consumer."""
        return dict(self._state)

    def _halt(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=_POLL_S)  # unblock a producer waiting on a full queue
        self._thread.join()
        self._thread = None

    def close(self) -> None:
        """Stop the background thread and close the source."""
        self._halt()
        self.source.close()
