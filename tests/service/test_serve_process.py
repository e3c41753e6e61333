"""``python -m service`` as a real process: what its log says, and what is left when it stops."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from tests.processes import running
from tests.service.helpers import SPEC, make_source
from tests.service.serving import answers, serve_process


@contextmanager
def _serve(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """Run the server on a new source root; yield it, its URL and its log."""
    make_source(tmp_path / "data" / "ds")
    log, args = tmp_path / "server.log", ["--root", tmp_path / "cache"]
    with serve_process(log, *args, "--source-root", tmp_path / "data") as (proc, url):
        yield proc, url, log


def _until(ready: object, seconds: float, message: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


def test_client_disconnecting_mid_request_costs_one_log_line(tmp_path: Path) -> None:
    with _serve(tmp_path) as (proc, url, log):
        port = int(url.rsplit(":", 1)[1])
        head = b"POST /stores HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(head + b'{"source": "ds", ')  # then hang up mid-body
        _until(lambda: b"disconnect" in log.read_bytes().lower(), 30, "nothing logged")
        assert answers(url)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    text = log.read_text()
    assert "Traceback" not in text, text
    lines = [ln for ln in text.splitlines() if "disconnect" in ln.lower()]
    assert len(lines) == 1 and "POST /stores" in lines[0], text


def test_the_server_process_serves_its_status_page(tmp_path: Path) -> None:
    with _serve(tmp_path) as (_, url, log):
        page = httpx.get(f"{url}/", timeout=30)  # its template found by package
        assert page.status_code == 200, log.read_text()
        assert "<h1>nostall cache</h1>" in page.text and "No store is cached." in page.text
        assert f'<code id="root">{tmp_path / "cache"}</code>' in page.text


def _name(proc: psutil.Process) -> str:
    try:
        return str(proc.name())
    except psutil.NoSuchProcess:
        return ""


def _status(client: httpx.Client, key: str) -> dict[str, object]:
    """The store's status, a poll whose connection was reset asked again (a GET, up to 3 times).

    Seen once with two test suites on two cores: ``Connection reset by peer`` mid-poll, not
    reproduced since (a keep-alive connection closed as the request went out is the likely
    cause, not confirmed). A server that died fails the next attempts too: it refuses them."""
    for attempt in range(3):
        try:
            doc: dict[str, object] = client.get(f"/stores/{key}").json()
            return doc
        except (httpx.ReadError, httpx.RemoteProtocolError):
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.mark.ray
@pytest.mark.slow
def test_ctrl_c_after_a_build_leaves_no_ray_process(tmp_path: Path) -> None:
    with _serve(tmp_path) as (proc, url, log):
        with httpx.Client(base_url=url, timeout=30) as client:
            key = client.post("/stores", json={"source": "ds", "spec": SPEC}).json()["key"]
            deadline = time.monotonic() + 240
            while (doc := _status(client, key))["status"] not in ("ready", "failed"):
                assert time.monotonic() < deadline, doc
                time.sleep(0.2)
            assert doc["status"] == "ready", doc
        family = psutil.Process(proc.pid).children(recursive=True)
        assert any("Agent" in _name(p) for p in family), family
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        proc.wait(timeout=120)
    _gone, alive = psutil.wait_procs(family, timeout=20)
    assert not running(alive), f"outlived the server: {running(alive)}\n{log.read_text()}"
