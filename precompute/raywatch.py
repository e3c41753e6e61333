"""The watchdog of a local Ray: when its driver goes, every process of that Ray goes too.

Ray fate-shares its head processes (GCS, raylet, monitors) with the driver, but not the
raylet's own children (the dashboard and runtime-env agents, the workers): the agents outlive
a killed driver by a minute or more, waiting for a GCS that is gone. This module runs as a
separate process (by file path, so it needs only the standard library and psutil) started by
:mod:`precompute.raylocal` in its own session, so a signal to the driver's process group does
not reach it:

1. Its stdin is a pipe from the driver. The kernel closes the pipe when the driver exits,
   however it exits (SIGKILL and the OOM killer included); the driver also closes it after a
   clean ``ray.shutdown()``.
2. Until then it keeps a set of the Ray processes and all their descendants, refreshed every
   :data:`INTERVAL_S` seconds: while ``ray.init`` runs, every child of the driver that is
   not named on the command line; once the driver writes a line ``PID PID ...`` on the pipe,
   the children ``ray.init`` started. Raylet's children are reparented when the raylet dies,
   so they must be known before that happens.
3. On end of file it SIGKILLs every known process that is still running (psutil checks the
   creation time, so a reused PID is never hit) and exits.
"""

from __future__ import annotations

import os
import select
import sys

import psutil

__all__ = ["INTERVAL_S", "Family", "main"]

INTERVAL_S = 0.5


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
                proc.kill()  # checks pid and creation time: a reused PID is left alone
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            killed.append(proc)
        psutil.wait_procs(killed, timeout=5)
        return killed


def _watch(fd: int, family: Family) -> None:
    """Read ``roots PID...`` lines from ``fd`` until end of file, refreshing ``family``."""
    buffer = b""
    while True:
        ready, _, _ = select.select([fd], [], [], INTERVAL_S)
        if ready:
            data = os.read(fd, 4096)
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
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
