"""A real local Ray (start_local_ray) stops without waiting on its autoscaler monitor.

Ray stops the GCS before the monitor, whose SIGTERM handler then stalls on the dead GCS until
Ray SIGKILLs it a fixed second later; ``LocalRay.stop`` kills the monitor first. The rest of
the shutdown then has no monitor to wait for. The test checks that behaviour, not a duration:
when ``ray.shutdown`` is called, the monitor process is gone already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import running

REPO = Path(__file__).resolve().parents[2]

DRIVER = """
import json
import psutil
import ray
from precompute.runtime.raylocal import start_local_ray
local = start_local_ray(1)
procs = [p for p in psutil.Process().children(recursive=True) if p.pid != local.watchdog.pid]
monitor = [p for p in procs if any("monitor.py" in part for part in p.cmdline())
           and not any("log_monitor" in part for part in p.cmdline())]
seen = {}
shutdown = ray.shutdown
def spy(*args, **kw):
    seen["monitor_alive"] = [p.pid for p in monitor if p.is_running() and p.status() != "zombie"]
    return shutdown(*args, **kw)
ray.shutdown = spy
local.stop()
print(json.dumps({"family": [p.pid for p in procs], "monitor": [p.pid for p in monitor],
                  **seen}), flush=True)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_stop_does_not_wait_for_the_autoscaler_monitor_and_leaves_nothing() -> None:
    import psutil

    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(row["family"]) >= 5  # GCS, raylet, monitor, dashboard, log monitor, agents, ...
    assert len(row["monitor"]) == 1, row  # the autoscaler monitor was found
    assert row["monitor_alive"] == [], row  # and was gone when ray.shutdown began
    procs = []
    for pid in row["family"]:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    assert running(procs) == []
