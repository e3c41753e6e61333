"""``python -m service`` as a real process on 127.0.0.1, started and waited for in one place."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.processes import REPO
from tests.servers import free_port

__all__ = ["answers", "serve_process"]


@functools.cache
def _client() -> httpx.Client:
    """One client for every poll: a new one per request costs about 17 ms of CPU (its SSL
    context), and :func:`serve_process` polls 20 times a second while a server starts."""
    return httpx.Client(timeout=5)


def answers(url: str, token: str | None = None) -> bool:
    """Whether the server at ``url`` answers ``GET /healthz`` with 200."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return _client().get(f"{url}/healthz", headers=headers).status_code == 200
    except httpx.TransportError:
        return False


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


@contextmanager
def serve_process(
    log: Path, *args: object, token: str | None = None, timeout: float = 60.0
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Run ``python -m service ARGS --port <free port>`` until it answers; yield it and its URL.

    The server runs in a session of its own (as a shell job does) with this checkout on its
    ``PYTHONPATH``, writing its output to ``log``; on exit, whatever of that session still
    runs is killed.

    Args:
        log: Where the server's stdout and stderr go.
        *args: Its arguments (``--root ...``), without ``--port``.
        token: Passed as ``--token`` and sent with the health check.
        timeout: Seconds to wait for it to answer.

    Raises:
        AssertionError: It exited, or did not answer within ``timeout`` (the log is in the
            message).
    """
    port = free_port()
    argv = [sys.executable, "-m", "service", *map(str, args), "--port", str(port)]
    argv += ["--token", token] if token else []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    try:
        while not answers(url, token):
            if proc.poll() is not None:
                raise AssertionError(f"python -m service exited {proc.returncode}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"python -m service did not answer in {timeout:g} s:\n{_tail(log)}"
                )
            time.sleep(0.05)
        yield proc, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
