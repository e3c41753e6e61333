"""A real local Ray (start_local_ray) stops without waiting on its autoscaler monitor.

Ray stops the GCS before the monitor, whose SIGTERM handler then stalls on the dead GCS until
Ray SIGKILLs it a fixed second later; ``LocalRay.stop`` kills the monitor first. The rest of
the shutdown (raylet, GCS, dashboard, log monitor) takes a few tenths of a second, so a stop
under one second is one that did not wait for the monitor.
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
import json, time
import psutil
from precompute.raylocal import start_local_ray
local = start_local_ray(1)
family = [p.pid for p in psutil.Process().children(recursive=True) if p.pid != local.watchdog.pid]
t0 = time.perf_counter()
local.stop()
print(json.dumps({"stop_s": time.perf_counter() - t0, "family": family}), flush=True)
"""


@pytest.mark.ray
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
    assert row["stop_s"] < 1.0, row
    procs = []
    for pid in row["family"]:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    assert running(procs) == []
