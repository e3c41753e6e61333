"""A child's peak RSS is its own, not the size of the parent that started it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from tests.processes import REPO


def test_a_child_started_by_a_large_parent_reports_its_own_peak() -> None:
    ballast = np.ones(600 << 20, np.uint8)  # 600 MiB resident in this (the parent) process
    code = (
        "import numpy as np\nfrom benchmarks.runner.child import peak_rss_mib\n"
        "x = np.ones(64 << 20, np.uint8)\nprint(peak_rss_mib())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    peak = float(out.stdout.split()[-1])
    assert int(ballast[-1]) == 1
    assert 64 <= peak < 600  # its 64 MiB array counts; the parent's 600 MiB do not
