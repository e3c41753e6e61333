"""A Ray address that something other than Ray answers at is judged in seconds, not minutes.

``ray.init`` retries a GCS that accepts the connection and says nothing (or closes it) for
minutes. Here real sockets on 127.0.0.1 play that part: one that accepts and stays silent, one
that accepts and closes, one that answers in HTTP/1.1. The address file a ``ray start`` Ray
would leave is written in a private Ray temporary folder (``RAY_TMPDIR``), so no other Ray on
the machine is seen or touched.

How long a probe waits is judged by the clock it is given (:class:`ProbeClock`), not by the
test's wall clock. Before a silent port the clock says the budget is spent: a probe that waited
past its budget by its own clock would wait an hour here, and the test would fail by its
timeout. Before a port that closes or answers the clock gives the probe an hour, so the verdict
comes from what the server did, however long a loaded machine takes to let it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from precompute import open_store_info
from precompute.errors import ClusterError
from precompute.runtime.gcsprobe import PROBE_S, check_gcs
from precompute.runtime.raysession import JOIN_PROBE_S, _join, _join_local
from tests.processes import REPO, running

MODES = ("silent", "close", "http1")
WHY = {
    "silent": "accepts connections but gave no gRPC (HTTP/2) answer within 2 s: not a Ray GCS",
    "close": "closed the connection without a gRPC (HTTP/2) answer: not a Ray GCS",
    "http1": "answered, but not as gRPC (HTTP/2): not a Ray GCS",
}


class ProbeClock:
    """A probe's clock: 0 at the first reading (the probe sets its deadline from it), ``later``
    at every one after, so what is left of the budget is the same at every wait."""

    def __init__(self, later: float) -> None:
        self.later = later
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 0.0 if self.reads == 1 else self.later


def clock_for(mode: str, budget: float) -> ProbeClock:
    """Spent at once before a silent port; an hour to spare before one that closes or answers."""
    return ProbeClock(budget if mode == "silent" else -3600.0)


@contextmanager
def _server(mode: str) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that is not Ray; yields its ``host:port``."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            if mode == "close":
                conn.close()
                continue
            if mode == "http1":
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            held.append(conn)  # silent: accepted, never answered

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        srv.close()


@pytest.fixture()
def ray_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private Ray temporary folder (short: Ray's socket paths), set as ``RAY_TMPDIR``."""
    tmp = Path(tempfile.mkdtemp(prefix="nsr", dir="/tmp"))
    (tmp / "ray").mkdir()
    monkeypatch.setenv("RAY_TMPDIR", str(tmp))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _record(tmp: Path, address: str) -> None:
    """Write ``address`` where ``ray start`` records it."""
    (tmp / "ray" / "ray_current_cluster").write_text(address + "\n")


def _cli_build(src: Path, out: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``precompute build SRC --out OUT --size 16`` with this environment (``RAY_TMPDIR``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", str(out)]
    return subprocess.run(
        [*command, "--size", "16", "--runner", "ray"],  # auto would build it in process
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_the_probe_says_why_once_its_budget_is_spent(mode: str) -> None:
    clock = clock_for(mode, 3600.0)  # an hour: a probe waiting past its clock fails by timeout
    with _server(mode) as address, pytest.raises(ConnectionError) as info:
        check_gcs(address, 3600.0, clock=clock)
    assert str(info.value) == f"{address} {WHY[mode].replace('2 s', '3600 s')}"
    assert clock.reads >= (2 if mode == "silent" else 1)  # the wait was for what was left


@pytest.mark.timeout(60)
def test_a_silent_port_is_given_up_on_by_the_real_clock_too() -> None:
    with _server("silent") as address, pytest.raises(ConnectionError) as info:
        check_gcs(address, 0.2)  # time.monotonic and the socket's own timeout: no hang
    assert str(info.value) == f"{address} {WHY['silent'].replace('2 s', '0.2 s')}"


def test_a_closed_port_is_nothing_answering() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        address = f"127.0.0.1:{srv.getsockname()[1]}"
    for where in (address, "127.0.0.1:70000"):  # refused; a port past 65535
        with pytest.raises(ConnectionError) as info:
            check_gcs(where)
        assert str(info.value).startswith(f"nothing answers at {where} (")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_recorded_address_that_is_not_ray_is_not_joined(
    mode: str, ray_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="precompute.runtime.raysession")
    clock = clock_for(mode, PROBE_S)
    with _server(mode) as address:
        _record(ray_tmp, address)
        assert _join_local(address, clock) is None  # the caller starts the build's own Ray
    assert clock.reads >= (2 if mode == "silent" else 1)  # judged by the clock it was given
    found = ray_tmp / "ray" / "ray_current_cluster"
    assert caplog.messages == [
        f"not joining the local Ray at {address} (found in {found}): {address} {WHY[mode]}; "
        "starting a local Ray"
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["--ray-address", "RAY_ADDRESS", "auto", "auto, RAY_ADDRESS"])
def test_a_named_address_that_is_not_ray_is_a_cluster_error_at_once(
    how: str, ray_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _server("silent") as address:
        if how == "auto, RAY_ADDRESS":  # auto: Ray connects to RAY_ADDRESS, not to the file
            monkeypatch.setenv("RAY_ADDRESS", address)
        else:
            _record(ray_tmp, address)
        named = address if how in ("--ray-address", "RAY_ADDRESS") else "auto"
        origin = f"RAY_ADDRESS={named}" if how == "RAY_ADDRESS" else f"--ray-address {named}"
        clock = clock_for("silent", JOIN_PROBE_S)
        with pytest.raises(ClusterError) as info:
            _join(named, origin, clock)
    assert clock.reads >= 2  # the silent port was waited for only as long as the clock allowed
    why = WHY["silent"].replace("2 s", "5 s")
    assert str(info.value) == f"cannot start or reach Ray at {named} ({origin}): {address} {why}"


@pytest.mark.ray
@pytest.mark.slow
def test_a_cli_build_beside_a_silent_port_builds_on_its_own_ray(
    ray_tmp: Path, small_dataset: Path, tmp_path: Path
) -> None:
    # the silent port, the harder of the two: a closed one is judged the same way in-process
    # above (test_a_recorded_address_that_is_not_ray_is_not_joined), each with its message
    mode = "silent"
    with _server(mode) as address:
        _record(ray_tmp, address)
        proc = _cli_build(small_dataset, tmp_path / "s", timeout=120)  # Ray's retries: minutes
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"precompute: not joining the local Ray at {address}" in proc.stderr
    assert f"{address} {WHY[mode]}; starting a local Ray" in proc.stderr
    assert open_store_info(tmp_path / "s").report["ray_address"] == "local"
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(ray_tmp) in " ".join(p.info["cmdline"] or [])
    ]
    _gone, alive = psutil.wait_procs(left, timeout=20)
    assert running(alive) == []  # the build's own Ray is gone with it


@pytest.mark.ray
@pytest.mark.slow
def test_a_cli_build_with_ray_address_at_a_silent_port_fails_with_the_probes_answer(
    ray_tmp: Path, small_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _server("silent") as address:
        monkeypatch.setenv("RAY_ADDRESS", address)
        # Ray's own retries would take minutes (over the timeout): the probe's 5 s (its
        # budget, tested above by its clock) answer instead, in the one line below
        proc = _cli_build(small_dataset, tmp_path / "s", timeout=120)
    assert proc.returncode == 1
    why = WHY["silent"].replace("2 s", "5 s")
    assert proc.stderr.strip().splitlines() == [
        f"precompute: error: cannot start or reach Ray at {address} (RAY_ADDRESS={address}): "
        f"{address} {why}"
    ]
