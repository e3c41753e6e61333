"""Find the ``gpu`` tests, run those this machine can run, and say why the others cannot.

The test files are found by what they hold (``mark.gpu``, or the ``DEVICES`` parameter list of
:mod:`tests.loaders.devices`, whose CUDA case is marked ``gpu``); pytest runs them with ``-m
gpu`` in a child process, through :mod:`benchmarks.gpucheck.plugin`, which deselects the tests
that need Ray or DALI and records every outcome. A module that cannot be imported here (a
package missing) is listed with its error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["gpu_test_files", "run_gpu_tests"]

_MARKS = ("mark.gpu", "tests.loaders.devices import DEVICES")


def gpu_test_files(tests: Path) -> list[Path]:
    """The ``test_*.py`` files under ``tests`` that hold ``gpu`` tests, sorted."""
    return sorted(
        p
        for p in tests.rglob("test_*.py")
        if any(m in p.read_text(errors="replace") for m in _MARKS)
    )


def run_gpu_tests(repo: Path, out: Path, timeout_s: float) -> dict[str, Any]:
    """Run the ``gpu`` tests that need neither Ray nor DALI; their log goes to ``out/pytest.txt``.

    Returns:
        Counts by outcome, the failures and skips with their reasons, the tests that cannot
        run here and why, the modules that could not be imported, the exit code and seconds.
    """
    files = [str(p.relative_to(repo)) for p in gpu_test_files(repo / "tests")]
    record = out / "gpu-tests.json"
    env = {**os.environ, "GPUCHECK_TESTS_JSON": str(record), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "pytest", *files, "-m", "gpu", "-q", "-rfE"]
    cmd += ["-p", "benchmarks.gpucheck.plugin", "-p", "no:cacheprovider"]
    cmd += ["--continue-on-collection-errors"]
    t0 = time.perf_counter()
    with open(out / "pytest.txt", "w") as log:
        try:
            proc = subprocess.run(
                cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s
            )
            rc: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {timeout_s:.0f} s"
    seconds = time.perf_counter() - t0
    got = json.loads(record.read_text()) if record.exists() else {}
    record.unlink(missing_ok=True)
    summary = _summary(files, got, rc, seconds)
    if not got.get("outcomes") and rc not in (0, 5):
        summary["problem"] = _why_nothing_ran(out / "pytest.txt", rc)
    return summary


def _why_nothing_ran(log: Path, rc: int | str) -> str:
    """One line for a pytest that recorded no outcome and failed (a conftest that cannot import)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E ")]
    head = lines[0] if lines else "no output"
    return f"pytest exit {rc}, no test ran: {head}" + (
        f" ({errors[-1][2:].strip()})" if errors else ""
    )


def _summary(
    files: list[str], got: dict[str, Any], rc: int | str, seconds: float
) -> dict[str, Any]:
    outcomes = got.get("outcomes", {})
    counts = Counter(o["outcome"] for o in outcomes.values())
    return {
        "files": files,
        "exit_code": rc,
        "seconds": round(seconds, 1),
        "counts": {k: counts.get(k, 0) for k in ("passed", "failed", "error", "skipped")},
        "failed": {
            k: o["reason"] for k, o in outcomes.items() if o["outcome"] in ("failed", "error")
        },
        "skipped": {k: o["reason"] for k, o in outcomes.items() if o["outcome"] == "skipped"},
        "cannot_run": got.get("cannot", {}),
        "uncollected": got.get("uncollected", {}),
    }
