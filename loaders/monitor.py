"""Stable import path of the resource monitor: ``from loaders.monitor import Monitor``.

The implementation lives in :mod:`loaders.diagnostics.monitor`.
"""

from __future__ import annotations

from loaders.diagnostics.monitor import (
    NO_GPU,
    GpuProbe,
    Monitor,
    MonitorResult,
    ProcessTree,
    Sample,
)

__all__ = ["NO_GPU", "GpuProbe", "Monitor", "MonitorResult", "ProcessTree", "Sample"]
