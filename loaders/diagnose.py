"""Stable import path of the diagnosis wrapper: ``from loaders.diagnose import Diagnose``.

The implementation lives in :mod:`loaders.diagnostics`.
"""

from __future__ import annotations

from loaders.diagnostics.advice import advise
from loaders.diagnostics.diagnose import Diagnose, usable_cores
from loaders.diagnostics.report import Diagnosis

__all__ = ["Diagnose", "Diagnosis", "advise", "usable_cores"]
