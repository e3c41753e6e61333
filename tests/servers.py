"""Helpers of tests that start servers or processes: a free port, waiting for a file or a build."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

__all__ = ["free_port", "wait_for", "wait_ready"]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(path: Path, proc: subprocess.Popen[Any] | None = None, timeout: float = 120.0) -> None:
    """Wait until ``path`` exists.

    Raises:
        AssertionError: ``proc`` exited first (its output is in the message), or ``timeout``
            seconds passed.
    """
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def wait_ready(client: httpx.Client, key: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll ``GET /stores/{key}`` until its build is ready or failed; return that document.

    Raises:
        AssertionError: The build did not finish within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = client.get(f"/stores/{key}").json()
        if doc["status"] in ("ready", "failed"):
            return dict(doc)
        time.sleep(0.05)
    raise AssertionError(f"build {key} did not finish")
