"""The watchdog of a local Ray: when its driver goes, every process of that Ray goes too.

Ray fate-shares its head processes (GCS, raylet, monitors) with the driver, but not the
raylet's own children (the dashboard and runtime-env agents, the workers): the agents outlive
a killed driver by a minute or more, waiting for a GCS that is gone. This module runs as a
separate process (by file path, so it needs only the standard library and psutil) started by
:mod:`precompute.runtime.raylocal` in its own session, so a signal to the driver's process group
does
not reach it:

1. Its stdin is a pipe from the driver. The kernel closes the pipe when the driver exits,
   however it exits (SIGKILL and the OOM killer included); after a clean ``ray.shutdown()``
   the driver writes a line ``stop``. As a child the driver forked (and never exec'd) holds
   the pipe open too, the watchdog also checks every :data:`INTERVAL_S` seconds that the
   driver still runs.
2. Until then it keeps a set of the Ray processes and all their descendants, refreshed every
   :data:`INTERVAL_S` seconds: while ``ray.init`` runs, every child of the driver that is
   not named on the command line; once the driver writes a line ``PID PID ...`` on the pipe,
   the children ``ray.init`` started. Raylet's children are reparented when the raylet dies,
   so they must be known before that happens.
3. On ``stop``, end of file or the driver's exit it SIGKILLs every known process that is
   still running (psutil checks the creation time, so a reused PID is never hit) and exits.
"""

from __future__ import annotations

import os
import select
import sys
import time

import psutil

__all__ = ["INTERVAL_S", "STOP", "Family", "main"]

INTERVAL_S = 0.5
STOP = b"stop"


class Family:
    """The processes of one local Ray, as far as the watchdog has seen them.

    Until :meth:`set_roots` is called (while ``ray.init`` runs), every new child of the driver
    is taken for a Ray process; afterwards only the named roots and their descendants are.

    Args:
        driver: PID of the process that starts Ray.
        before: The driver's children from before ``ray.init`` (not Ray's).
    """

    def __init__(self, driver: int, before: list[int]) -> None:
        self.driver = driver
        try:
            self._driver_proc: psutil.Process | None = psutil.Process(driver)
        except psutil.NoSuchProcess:  # died before we started: its Ray died with it
            self._driver_proc = None
        self.roots: set[int] | None = None
        self.known: dict[int, psutil.Process] = {}
        self.before = {*before, os.getpid()}

    def set_roots(self, pids: list[int]) -> None:
        """Watch ``pids`` (the driver's children that ``ray.init`` started) and descendants."""
        self.roots = set(pids)
        self.known = {pid: proc for pid, proc in self.known.items() if pid in self.roots}
        for pid in self.roots - set(self.known):
            try:
                self.known[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                continue
        self.refresh()

    def driver_gone(self) -> bool:
        """Whether the driver has exited (a child it forked may still hold the pipe open)."""
        if self._driver_proc is None:
            return True
        try:
            running = self._driver_proc.is_running()  # False for a reused PID too
            return not running or self._driver_proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def refresh(self) -> None:
        """Add the running descendants of the known processes (and new children, see above)."""
        children: dict[int, list[psutil.Process]] = {}
        for proc in psutil.process_iter(["ppid"]):
            children.setdefault(proc.info["ppid"], []).append(proc)
        if self.roots is None:
            for proc in children.get(self.driver, ()):
                if proc.pid not in self.before:
                    self.known.setdefault(proc.pid, proc)
        todo = list(self.known)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child.pid not in self.known:
                    self.known[child.pid] = child
                    todo.append(child.pid)

    def kill(self) -> list[psutil.Process]:
        """SIGKILL every known process still running; return them."""
        self.refresh()
        killed = []
        for proc in self.known.values():
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:  # dead; its parent will reap it
                    continue
                proc.kill()  # checks pid and creation time: a reused PID is left alone
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            killed.append(proc)
        _wait_exited(killed, timeout=5)
        return killed


def _exited(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)  # exited: its parent reaps it
    except psutil.NoSuchProcess:
        return True


def _wait_exited(procs: list[psutil.Process], timeout: float) -> None:
    """Wait until every one of ``procs`` has exited; a zombie has.

    ``psutil.wait_procs`` waits for a zombie to be reaped, which takes the whole timeout when
    its parent is the driver that waits for this watchdog.
    """
    deadline = time.monotonic() + timeout
    while not all(_exited(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.02)


def _watch(fd: int, family: Family) -> None:
    """Follow the driver's lines on ``fd`` (roots, or ``stop``) until it stops or goes."""
    buffer = b""
    while not family.driver_gone():
        ready, _, _ = select.select([fd], [], [], INTERVAL_S)
        if ready:
            data = os.read(fd, 4096)
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line == STOP:
                    return
                family.set_roots([int(pid) for pid in line.split()])
        family.refresh()


def main(argv: list[str]) -> int:
    """Watch the driver ``argv[0]`` until its pipe on stdin closes, then kill its Ray.

    ``argv[1:]`` are the driver's children that are not Ray's.
    """
    family = Family(int(argv[0]), [int(pid) for pid in argv[1:]])
    _watch(sys.stdin.fileno(), family)
    family.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
