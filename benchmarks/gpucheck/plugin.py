"""A pytest plugin for the check's test run: keep the ``gpu`` tests this machine can run.

Loaded with ``-p benchmarks.gpucheck.plugin`` by :mod:`benchmarks.gpucheck.gputests`. After
collection it deselects, with the reason, each ``gpu`` test that needs DALI (marker ``dali``)
or Ray (marker ``ray`` or the ``ray_local`` fixture); it records every test module that could
not be imported, and each test's outcome, into the JSON file named by ``$GPUCHECK_TESTS_JSON``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

__all__ = ["needs"]

_RECORD: dict[str, Any] = {"cannot": {}, "uncollected": {}, "outcomes": {}}


def needs(item: pytest.Item) -> str | None:
    """Why ``item`` cannot run on the check's machine (no Ray, no DALI), or None."""
    if "dali" in item.keywords:
        return "needs DALI (marker dali)"
    if "ray" in item.keywords:
        return "needs Ray (marker ray)"
    if "ray_local" in getattr(item, "fixturenames", ()):
        return "needs Ray (fixture ray_local)"
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the ``gpu`` tests that need neither Ray nor DALI; record why the others go."""
    keep, drop = [], []
    for item in items:
        why = needs(item) if "gpu" in item.keywords else "not a gpu test"
        if why is None:
            keep.append(item)
            continue
        drop.append(item)
        if "gpu" in item.keywords:
            _RECORD["cannot"][item.nodeid] = why
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Record a module that could not be collected, with the last line of its error."""
    if report.failed:
        lines = [ln for ln in str(report.longrepr).splitlines() if ln.strip()]
        _RECORD["uncollected"][report.nodeid] = lines[-1].strip() if lines else "?"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record each test's outcome: passed, failed, error (setup/teardown) or skipped."""
    outcomes = _RECORD["outcomes"]
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        outcomes[report.nodeid] = {"outcome": "skipped", "reason": str(reason)}
    elif report.failed:
        kind = "failed" if report.when == "call" else "error"
        lines = [ln for ln in str(report.longrepr).splitlines() if ln.strip()]
        outcomes[report.nodeid] = {"outcome": kind, "reason": lines[-1] if lines else ""}
    elif report.when == "call":
        outcomes[report.nodeid] = {"outcome": "passed", "seconds": round(report.duration, 3)}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the record where ``$GPUCHECK_TESTS_JSON`` says."""
    path = os.environ.get("GPUCHECK_TESTS_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(_RECORD, f, indent=1)
