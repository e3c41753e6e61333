"""The Ray watchdog on plain processes (fast, no Ray): it kills the family of a driver that dies.

The Ray end of it (a real build killed mid-way, ``precompute serve`` stopped with Ctrl-C) is
tested in ``test_resume.py`` and ``tests/service/test_serve_process.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.processes import wait_exited

pytestmark = pytest.mark.slow  # real processes started, killed and waited for

REPO = Path(__file__).resolve().parents[2]

# A driver that starts a watchdog, then a fake "Ray" (a child with a child of its own, which
# ignores SIGTERM), names it, forks a child that keeps the watchdog's pipe open, and waits; a
# line on its stdin makes it stop its "Ray" the way LocalRay.stop() does after ray.shutdown().
DRIVER = """
import os, subprocess, sys, time
from precompute.runtime.raylocal import LocalRay, children, name_roots, start_watchdog
before = children()
watchdog = start_watchdog(before)
sleeper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
parent = "import subprocess as s, sys, time; s.Popen([sys.executable, '-c', %r]); time.sleep(600)"
fake_ray = subprocess.Popen([sys.executable, "-c", parent % sleeper])
name_roots(watchdog, [fake_ray.pid])
if os.fork() == 0:
    time.sleep(600)
print(watchdog.pid, fake_ray.pid, flush=True)
sys.stdin.readline()
LocalRay(watchdog).stop()
print("stopped", flush=True)
time.sleep(600)
"""


def _start() -> tuple[subprocess.Popen[str], psutil.Process, list[psutil.Process]]:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert driver.stdout is not None
    watchdog_pid, ray_pid = map(int, driver.stdout.readline().split())
    fake_ray = psutil.Process(ray_pid)
    deadline = time.monotonic() + 30
    while not fake_ray.children():  # its own child is starting
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return driver, psutil.Process(watchdog_pid), [fake_ray, *fake_ray.children()]


def _forked(driver: subprocess.Popen[str], family: list[psutil.Process]) -> psutil.Process:
    """The child the driver forked: not Ray's, and it holds the write end of the pipe."""
    known = {p.pid for p in family}
    (forked,) = [p for p in psutil.Process(driver.pid).children() if p.pid not in known]
    return forked


def test_killed_driver_takes_its_family_along_though_a_fork_holds_the_pipe() -> None:
    driver, watchdog, family = _start()
    forked = _forked(driver, [*family, watchdog])
    try:
        time.sleep(1)  # two watchdog ticks with the driver alive: nothing is killed
        assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family)
        driver.kill()
        driver.wait()
        alive = wait_exited([*family, watchdog], timeout=10)
        assert not alive, alive
        assert forked.is_running()  # not Ray's: left alone
    finally:
        forked.kill()


def test_clean_stop_kills_the_family_while_the_driver_lives_on() -> None:
    driver, watchdog, family = _start()
    forked = _forked(driver, [*family, watchdog])
    assert driver.stdin is not None and driver.stdout is not None
    try:
        driver.stdin.write("stop\n")
        driver.stdin.flush()
        assert driver.stdout.readline() == "stopped\n"
        alive = wait_exited([*family, watchdog], timeout=10)  # zombies: exited, not reaped yet
        assert not alive and driver.poll() is None, alive
    finally:
        driver.kill()
        driver.wait()
        forked.kill()
