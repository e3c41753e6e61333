"""What a build does before its shards run, overlapped with Ray's start-up.

:func:`precompute.job.build` lists the source on a background thread (:func:`in_background`,
:func:`list_source`) while the main thread starts or joins Ray (:func:`open_build_ray`). A
complete store at ``--out`` (:func:`holds_complete`) makes the build list first and start Ray
only if it turns out to be needed: an identical re-run returns without starting Ray.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from precompute.buildsource import resolve_build
from precompute.errors import PrecomputeError
from precompute.fieldsources import FieldSource
from precompute.format import _read_group_attrs
from precompute.raysession import RaySession, open_ray
from precompute.sources import Source
from precompute.spec import BuildSpec

__all__ = ["holds_complete", "in_background", "list_source", "open_build_ray"]

T = TypeVar("T")


def in_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` on a daemon thread (Ctrl-C never waits for it); its result or error."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # re-raised by future.result() on the caller's thread
            future.set_exception(exc)

    threading.Thread(target=run, name="precompute-listing", daemon=True).start()
    return future


def list_source(
    src: str, spec: BuildSpec, content_hash: bool, import_ray: bool = True
) -> tuple[Source | FieldSource, BuildSpec, str]:
    """List and fingerprint the source: what runs while Ray starts.

    With ``import_ray`` Ray Data is imported here too (it configures its loggers on import:
    before the build quietens them); a re-run over a complete store skips it.
    """
    if import_ray:
        import ray.data  # noqa: F401

    return resolve_build(src, spec, content_hash)


def holds_complete(root: Path) -> bool:
    """Whether ``root`` holds a complete store (a re-run then needs no Ray, nor waits for one)."""
    try:
        return (root / "zarr.json").is_file() and bool(_read_group_attrs(root).get("complete"))
    except PrecomputeError:  # not a store: the build's own checks say why, later
        return False


def open_build_ray(stack: ExitStack, address: str | None) -> RaySession:
    """Open the build's Ray (:func:`precompute.raysession.open_ray`), closed by ``stack``.

    Ray Data logs at ERROR only until ``stack`` closes.
    """
    session = open_ray(address)
    stack.callback(session.close)
    stack.enter_context(_quiet_ray_data())
    return session


@contextmanager
def _quiet_ray_data() -> Iterator[None]:
    """Ray Data's own log lines at ERROR only while the build runs (ours counts shards)."""
    # Ray Data configures its loggers on import, which may still run on the listing thread:
    # this import waits for it, so the level set below is not undone.
    import ray.data  # noqa: F401

    data_log = logging.getLogger("ray.data")
    level = data_log.level
    data_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        data_log.setLevel(level)
