"""Samples done in the shards still being built, for a build's watchers (the cache's page).

A shard's completion marker is written only when the whole shard is, so a build of one shard
(200 samples) showed no progress until it ended. While a shard task runs, a
:class:`SampleProgress` writes ``_nostall/progress/NNNNNN.json`` (``{"done": n}``) every
:data:`EVERY_S` seconds when the count changed, on a thread of its own, through the store's
storage (a folder or an object store); the task deletes it when it ends, and the build removes
any left over (``outputs.remove_partials``). :func:`samples_done` adds the written shards'
samples and these counts.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from types import TracebackType

from precompute.errors import StoreError
from precompute.format.layout import MARKER_DIR, StoreLayout
from precompute.storage.location import Location, location

__all__ = ["EVERY_S", "PROGRESS_DIR", "SampleProgress", "samples_done"]

EVERY_S = 0.5
PROGRESS_DIR = "progress"  # under MARKER_DIR


class SampleProgress:
    """The samples a running shard task has decoded, written for watchers every ``every`` s."""

    def __init__(self, root: str | Path | Location, shard: int, every: float = EVERY_S) -> None:
        self.file = location(root) / MARKER_DIR / PROGRESS_DIR / f"{shard:06d}.json"
        self.done = 0
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="precompute-progress", daemon=True)

    def add(self, n: int = 1) -> None:
        """Count ``n`` more samples done (one thread adds: the task's)."""
        self.done += n

    def __enter__(self) -> SampleProgress:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(OSError, StoreError):
            self.file.delete()

    def _run(self) -> None:
        written = 0
        while not self._stop.wait(self._every):
            done = self.done
            if done != written:
                with contextlib.suppress(OSError, StoreError):  # a watcher's view, best effort
                    self.file.write_bytes(json.dumps({"done": done}).encode())
                    written = done


def samples_done(root: str | Path | Location, layout: StoreLayout) -> int:
    """Samples of the shards written, plus those the running shard tasks have reported."""
    where = location(root) / MARKER_DIR
    written = {_shard(k) for k in (where / "shards").list() if k.endswith(".json")}
    done = sum(_size(layout, s) for s in written if s is not None)
    for key in (where / PROGRESS_DIR).list():
        shard = _shard(key)
        if shard is not None and shard not in written:
            done += _reported(where / PROGRESS_DIR / f"{shard:06d}.json", layout, shard)
    return done


def _reported(file: Location, layout: StoreLayout, shard: int) -> int:
    """A running task's count (0 for a file gone or half-read meanwhile)."""
    try:
        return min(int(json.loads(file.read_bytes())["done"]), _size(layout, shard))
    except (OSError, StoreError, ValueError, TypeError, KeyError, IndexError):
        return 0


def _shard(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    stem = name[: -len(".json")] if name.endswith(".json") else ""
    return int(stem) if stem.isdigit() else None


def _size(layout: StoreLayout, shard: int) -> int:
    if not 0 <= shard < layout.num_shards:
        return 0
    start, stop = layout.shard_range(shard)
    return stop - start
