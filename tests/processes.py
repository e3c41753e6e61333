"""Process helpers shared by the tests that check what outlives a killed driver or server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]


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


def spawn_module(module: str, *args: object) -> subprocess.Popen[str]:
    """Start ``python -m module ARGS`` from the repository root, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
