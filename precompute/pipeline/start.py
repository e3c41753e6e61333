"""What a build does before its shards run, overlapped with Ray's start-up.

:func:`precompute.job.build` lists the source on a background thread (:func:`in_background`,
:func:`list_source`) while the main thread starts or joins Ray (:func:`open_build_ray`). A
complete store at ``--out`` (:func:`holds_complete`) makes the build list first and start Ray
only if it turns out to be needed: an identical re-run returns without starting Ray. If Ray
cannot be started or joined, the listing is stopped (:meth:`Background.stop`) before the build
raises its :class:`~precompute.errors.ClusterError`.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

from precompute.errors import PrecomputeError
from precompute.pipeline.outputs import complete_attrs
from precompute.runtime.raysession import RaySession, open_ray
from precompute.sources.fields import FieldSource
from precompute.sources.listing import listing_until
from precompute.sources.resolve import resolve_build
from precompute.spec import BuildSpec
from precompute.storage.location import Location

__all__ = ["Background", "holds_complete", "in_background", "list_source", "open_build_ray"]

# How long a build whose Ray failed waits for its listing to reach its next checkpoint (the
# listing thread may still be importing Ray Data); a read stuck longer is abandoned.
STOP_WAIT_S = 60.0


T = TypeVar("T")


class Background(Generic[T]):
    """A function running on a daemon thread (Ctrl-C never waits for it) that can be stopped.

    The function runs under :func:`precompute.sources.listing.listing_until`: a listing ends at its
    next :func:`~precompute.sources.listing.checkpoint` once :meth:`stop` is called.
    """

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._future: Future[T] = Future()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(fn, args), name="precompute-listing", daemon=True
        )
        self._thread.start()

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        try:
            self._future.set_result(listing_until(self._stop, fn, *args))
        except BaseException as exc:  # re-raised by result() on the caller's thread
            self._future.set_exception(exc)

    def result(self) -> T:
        """The function's result; its error is raised here, on the caller's thread."""
        return self._future.result()

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Ask the function to stop and wait up to ``wait_s`` for its thread to end.

        A thread stuck in one read past ``wait_s`` is abandoned: it is a daemon thread, so
        the interpreter still exits.
        """
        self._stop.set()
        self._thread.join(wait_s)


def in_background(fn: Callable[..., T], *args: Any) -> Background[T]:
    """Run ``fn(*args)`` on a daemon thread; :meth:`Background.result` gives its result."""
    return Background(fn, *args)


def list_source(
    src: str, spec: BuildSpec, content_hash: bool, import_ray: bool = True
) -> tuple[FieldSource, BuildSpec, str]:
    """List and fingerprint the source: what runs while Ray starts.

    With ``import_ray`` Ray Data is imported here too (it configures its loggers on import:
    before the build quietens them); a re-run over a complete store skips it.
    """
    if import_ray:
        import ray.data  # noqa: F401

    return resolve_build(src, spec, content_hash)


def holds_complete(root: Path | Location) -> bool:
    """Whether ``root`` holds a complete store (a re-run then needs no Ray, nor waits for one)."""
    try:
        return complete_attrs(root) is not None
    except PrecomputeError:  # not a store: the build's own checks say why, later
        return False


def open_build_ray(
    stack: ExitStack,
    address: str | None,
    listing: Background[Any] | None = None,
    runtime_env: dict[str, Any] | None = None,
) -> RaySession:
    """Open the build's Ray (:func:`precompute.runtime.raysession.open_ray`), closed by ``stack``.

    ``runtime_env``: the job's, where a running Ray is joined (a transform's modules).

    Ray Data logs at ERROR only until ``stack`` closes. If Ray cannot be opened (or Ctrl-C
    interrupts it), ``listing`` is stopped before the error is raised: no thread goes on
    reading the source after the build has failed.
    """
    try:
        with _own_sigterm():
            session = open_ray(address, runtime_env=runtime_env)
    except BaseException as exc:
        if listing is not None:  # Ctrl-C never waits for it (a daemon thread)
            listing.stop(STOP_WAIT_S if isinstance(exc, Exception) else 0)
        raise
    stack.callback(session.close)
    stack.enter_context(_quiet_ray_data())
    return session


@contextmanager
def _own_sigterm() -> Iterator[None]:
    """Keep this process's SIGTERM handler across ``ray.init``, which sets its own.

    Ray's driver handler calls ``sys.exit`` from wherever the main thread is, which ended a
    build in SIGABRT with Ray's native stack dump; the CLI's handler unwinds as Ctrl-C does
    (``precompute.cli``), and a library caller keeps the handler it had.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if before is not None:  # None: a handler not set from Python, left to Ray
            signal.signal(signal.SIGTERM, before)


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
