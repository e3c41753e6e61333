"""A real local Ray (start_local_ray) lives until it is stopped, and stops without waiting.

Ray stops the GCS before the monitor, whose SIGTERM handler then stalls on the dead GCS until
Ray SIGKILLs it a fixed second later; ``LocalRay.stop`` kills the monitor first. The rest of
the shutdown then has no monitor to wait for. Ray's GCS and raylet die with the *thread* that
started them (``PR_SET_PDEATHSIG``), and ``ray.shutdown`` then waits 5 s for the dead raylet:
here Ray is started on a thread that ends before the stop. The test checks behaviour, not a
duration: when ``ray.shutdown`` is called, the monitor is gone and the GCS and raylet run.
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
import threading
import ray
from precompute.runtime.raylocal import start_local_ray
box = {}
starter = threading.Thread(target=lambda: box.update(local=start_local_ray(1)))
starter.start()
starter.join()  # the thread that started Ray has ended
local = box["local"]
procs = [p for p in psutil.Process().children(recursive=True) if p.pid != local.watchdog.pid]
core = [p for p in procs if p.name() in ("gcs_server", "raylet")]
monitor = [p for p in procs if any("monitor.py" in part for part in p.cmdline())
           and not any("log_monitor" in part for part in p.cmdline())]
seen = {}
shutdown = ray.shutdown
def spy(*args, **kw):
    seen["monitor_alive"] = [p.pid for p in monitor if p.is_running() and p.status() != "zombie"]
    seen["core_alive"] = sorted(p.name() for p in core if p.is_running() and p.status() != "zombie")
    return shutdown(*args, **kw)
ray.shutdown = spy
local.stop()
print(json.dumps({"family": [p.pid for p in procs], "monitor": [p.pid for p in monitor],
                  **seen}), flush=True)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_started_on_a_thread_that_ended_runs_until_stop_which_leaves_nothing() -> None:
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
    assert row["core_alive"] == ["gcs_server", "raylet"], row  # outlived the starting thread
    procs = []
    for pid in row["family"]:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    assert running(procs) == []
