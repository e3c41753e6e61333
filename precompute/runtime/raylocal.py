"""A local Ray that goes when the process that started it goes.

:func:`start_local_ray` starts a lean local Ray (``num_cpus`` set, no dashboard, quiet logs)
together with its watchdog (:mod:`precompute.runtime.raywatch`, a separate process in its own
session). :meth:`LocalRay.stop` shuts Ray down and then lets the watchdog kill whatever
``ray.shutdown()`` left running (the raylet's agents linger otherwise); if the driver dies
instead (SIGKILL, the OOM killer, a scheduler's timeout), the watchdog sees its pipe close and
does the same. :func:`init_options` are the ``ray.init`` settings shared by every caller.

Ray starts its head processes with ``PR_SET_PDEATHSIG`` (Linux), which fires when the *thread*
that started them ends, not the process: a Ray started on a worker thread (the cache service
builds on a pool's threads) died when that thread did, and the ``ray.shutdown()`` after it
then waited 5 s for the dead raylet. Off the main thread, ``ray.init`` therefore runs on a
thread of its own that lasts until :meth:`LocalRay.stop`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import psutil

from precompute.errors import ClusterError
from precompute.runtime import raywatch

__all__ = [
    "LocalRay",
    "available_cpus",
    "children",
    "init_options",
    "name_roots",
    "start_local_ray",
    "start_watchdog",
]

log = logging.getLogger("precompute.runtime.raylocal")

# How long stop() waits for the watchdog to kill Ray's leftovers and exit.
_STOP_TIMEOUT_S = 30.0


def available_cpus() -> int:
    """Return the CPUs this process may run on (its affinity mask where there is one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def init_options() -> dict[str, Any]:
    """Return the ``ray.init`` keyword arguments of every build (local or a cluster)."""
    return {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "configure_logging": True,
    }


class LocalRay:
    """A local Ray started by this process, and its watchdog; :meth:`stop` ends both.

    Args:
        watchdog: The watchdog process; its stdin is the pipe whose closing it waits for.
    """

    def __init__(
        self, watchdog: subprocess.Popen[bytes], starter: threading.Event | None = None
    ) -> None:
        self.watchdog = watchdog
        self._starter = starter  # set: the thread that started Ray may end

    def stop(self) -> None:
        """Shut Ray down, then have the watchdog kill what is left of it and exit."""
        import ray

        try:
            _kill_monitor()
            ray.shutdown()
        finally:
            if self._starter is not None:
                self._starter.set()
            _stop(self.watchdog.stdin)
            try:
                self.watchdog.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning(
                    "Ray watchdog %d still running after %.0f s", self.watchdog.pid, _STOP_TIMEOUT_S
                )


def _kill_monitor() -> None:
    """SIGKILL the autoscaler monitor of the local Ray this process started, if it runs.

    ``ray.shutdown()`` stops the GCS before the monitor; the monitor's SIGTERM handler then
    tries to report "autoscaler failed" to that GCS and stalls until Ray SIGKILLs it one second
    later, in every local build. Killing it first is safe: a local Ray has one fixed node, so
    its monitor has nothing to scale and nothing to hand over, and no other Ray process depends
    on it. ``Node.kill_monitor`` is Ray-internal: without it (another Ray version) nothing
    happens here and the shutdown is only slower.
    """
    import ray._private.worker as ray_worker

    node = getattr(ray_worker, "_global_node", None)
    kill = getattr(node, "kill_monitor", None)
    if callable(kill):
        kill(check_alive=False)


def _stop(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        with contextlib.suppress(BrokenPipeError):  # the watchdog is gone already
            pipe.write(raywatch.STOP + b"\n")  # a forked child may hold the pipe open
            pipe.close()


def children() -> list[int]:
    """Return the PIDs of this process's children."""
    return [p.pid for p in psutil.Process().children()]


def start_watchdog(before: list[int]) -> subprocess.Popen[bytes]:
    """Start the watchdog of this process's Ray; ``before``: children that are not Ray's."""
    command = [sys.executable, "-I", raywatch.__file__, str(os.getpid()), *map(str, before)]
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True
    )


def name_roots(watchdog: subprocess.Popen[bytes], roots: list[int]) -> None:
    """Tell ``watchdog`` which children are Ray's (it then watches only their families).

    Raises:
        ClusterError: The watchdog is not running.
    """
    if watchdog.stdin is None or watchdog.poll() is not None:
        raise ClusterError(f"the Ray watchdog exited early (status {watchdog.returncode})")
    watchdog.stdin.write(" ".join(map(str, roots)).encode() + b"\n")
    watchdog.stdin.flush()


def start_local_ray(num_cpus: int | None = None) -> LocalRay:
    """Start a local Ray bound to this process's lifetime; call :meth:`LocalRay.stop` after.

    Args:
        num_cpus: CPUs Ray may schedule on; defaults to :func:`available_cpus`.

    Raises:
        ClusterError: Ray cannot be started.
    """
    import ray

    def init() -> None:
        # address="local": always a new Ray of our own, never a cluster that `ray start` (or
        # another build) left running on this machine, which ray.init() would otherwise join.
        ray.init(address="local", num_cpus=num_cpus or available_cpus(), **init_options())

    before = children()
    watchdog = start_watchdog(before)  # first: it must see every process ray.init starts
    starter = None
    try:
        starter = _on_a_lasting_thread(init)
        name_roots(watchdog, [p for p in children() if p not in before and p != watchdog.pid])
    except BaseException as exc:
        LocalRay(watchdog, starter).stop()
        if isinstance(exc, (ConnectionError, RuntimeError, ValueError, TimeoutError)):
            raise ClusterError(f"cannot start or reach Ray locally: {exc}") from exc
        raise
    return LocalRay(watchdog, starter)


def _on_a_lasting_thread(call: Callable[[], None]) -> threading.Event | None:
    """Run ``call`` here on the main thread; else on a thread that lasts until the event is set.

    Returns:
        The event that lets that thread end (None on the main thread).

    Raises:
        BaseException: What ``call`` raised.
    """
    if threading.current_thread() is threading.main_thread():
        call()
        return None
    release, done = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller
            failure.append(exc)
        done.set()
        release.wait()  # the processes it started die when this thread ends

    # a daemon: it never holds up the interpreter's exit (stop() sets the event at atexit)
    threading.Thread(target=run, name="nostall-ray-start", daemon=True).start()
    done.wait()
    if failure:
        release.set()
        raise failure[0]
    return release
