"""The build queue of the HTTP server: requested builds run in a small thread pool.

Each thread calls :meth:`Cache.build`, which takes the per-key file lock, so a key requested
twice (or also being built by another process) is still built once. The heavy lifting happens
in ``precompute.job.build`` on Ray; the threads only wait for it.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from service.cache.builders import BuildRequest
from service.cache.store import Cache
from service.errors import QueueFullError

__all__ = ["BuildQueue", "Job"]

log = logging.getLogger("service.http.jobs")


@dataclass(frozen=True)
class Job:
    """The state of one requested build (``queued`` -> ``building`` -> ``ready`` | ``failed``)."""

    key: str
    source: str
    spec: dict[str, Any]
    status: str = "queued"
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "key": self.key,
            "source": self.source,
            "spec": self.spec,
            "status": self.status,
            "submitted": self.submitted,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
        }


class BuildQueue:
    """Run build requests for one cache in ``workers`` threads, one job per key at a time.

    Args:
        cache: The cache to build into.
        workers: Concurrent builds.
        max_pending: Most builds queued or running at once; more raise ``QueueFullError``.
    """

    def __init__(self, cache: Cache, workers: int = 1, max_pending: int = 64) -> None:
        if workers < 1 or max_pending < 1:
            raise ValueError(
                f"workers and max_pending must be >= 1, got {workers!r}, {max_pending!r}"
            )
        self.cache = cache
        self.max_pending = max_pending
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nostall-build")
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}

    def submit(self, request: BuildRequest) -> Job:
        """Queue ``request`` unless the same key is queued or building; return its job."""
        with self._lock:
            job = self._jobs.get(request.key)
            if job is not None and job.status in ("queued", "building"):
                return job
            pending = sum(j.status in ("queued", "building") for j in self._jobs.values())
            if pending >= self.max_pending:
                raise QueueFullError(
                    f"{pending} builds are queued or running (limit "
                    f"{self.max_pending}); retry later"
                )
            job = Job(request.key, str(request.source), request.spec.to_dict())
            self._jobs[request.key] = job
        self._pool.submit(self._run, request)
        return job

    def _set(self, key: str, **changes: Any) -> None:
        with self._lock:
            self._jobs[key] = replace(self._jobs[key], **changes)

    def _run(self, request: BuildRequest) -> None:
        self._set(request.key, status="building", started=time.time())
        try:
            self.cache.build(request)
        except Exception as exc:  # carried back as a value: the job records it
            log.warning("build %s failed: %s", request.key, exc)
            self._set(
                request.key,
                status="failed",
                finished=time.time(),
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        self._set(request.key, status="ready", finished=time.time())

    def get(self, key: str) -> Job | None:
        """Return the latest job of ``key``, if any."""
        with self._lock:
            return self._jobs.get(key)

    def jobs(self) -> list[Job]:
        """Return all jobs, oldest first."""
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: j.submitted)

    def counts(self) -> dict[str, int]:
        """Return the number of jobs per status."""
        out = dict.fromkeys(("queued", "building", "ready", "failed"), 0)
        for job in self.jobs():
            out[job.status] += 1
        return out

    def shutdown(self, wait: bool = True) -> None:
        """Stop accepting jobs; optionally wait for running ones."""
        self._pool.shutdown(wait=wait, cancel_futures=True)
