"""Process helpers shared by the tests that check what outlives a killed driver or server."""

from __future__ import annotations

import psutil


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The processes of ``procs`` still alive (a zombie has exited: not counted)."""
    alive = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive
