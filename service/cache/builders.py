"""What a build gets, and the default builder: ``precompute.job.build`` on Ray.

A builder is any callable taking a :class:`BuildRequest` that leaves a **complete** store at
``request.out`` (or raises). The cache checks the result, so a builder cannot publish a partial
or mismatched store. Tests inject small real builders; production uses :func:`precompute_builder`.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from precompute.spec import BuildSpec

__all__ = ["BuildRequest", "Builder", "precompute_builder"]


@dataclass(frozen=True)
class BuildRequest:
    """One store to build.

    Attributes:
        key: The cache key the store will be published under.
        source: Canonical path (or ``s3://`` URL) of the raw dataset.
        spec: The parsed build spec.
        out: Where to write the store (a private directory under the cache root; may hold an
            interrupted build of the same key, which the builder may resume).
        fingerprint: The source fingerprint in the key; the store must record the same one.
        content_hash: Whether the fingerprint hashes file contents.
    """

    key: str
    source: Path | str
    spec: BuildSpec
    out: Path
    fingerprint: str
    content_hash: bool = False


Builder = Callable[[BuildRequest], None]
_RAY_INIT = threading.Lock()


def _ensure_ray(address: str | None) -> None:
    """Start (or join) Ray once per process, so concurrent builds share it.

    The same Ray a ``precompute build --ray-address address`` would use
    (:func:`precompute.runtime.raysession.open_ray`: ``RAY_ADDRESS``, a running ``ray start`` Ray of
    this machine's size, else its own). A Ray of its own is bound to this process
    (``precompute.runtime.raylocal``): stopped at exit, and its watchdog kills what is left of it if
    the process dies without exiting cleanly; a joined one is only disconnected from.
    """
    import ray  # lazy: only the real builder needs Ray

    from precompute.runtime.raysession import open_ray

    with _RAY_INIT:
        if ray.is_initialized():
            return
        atexit.register(open_ray(address).close)  # runs before Ray's own atexit shutdown


def precompute_builder(
    *, ray_address: str | None = None, progress: bool = False, keep_ray: bool = False
) -> Builder:
    """Return a builder that runs ``precompute.job.build`` (Ray Data) for each request.

    Args:
        ray_address: Ray cluster address; None starts or joins a local Ray.
        progress: Show the build's progress bar.
        keep_ray: Start Ray once and keep it for later builds (the server does; concurrent
            builds in one process need it). Otherwise each build starts and stops its own
            Ray unless one is already running.
    """

    def build(request: BuildRequest) -> None:
        from precompute import job  # lazy: imports Ray

        if keep_ray:
            _ensure_ray(ray_address)
        job.build(
            str(request.source),
            str(request.out),
            request.spec,
            ray_address=ray_address,
            progress=progress,
            content_hash=request.content_hash,
        )

    return build
