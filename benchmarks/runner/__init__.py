"""The one runner of the per-issue benchmarks (:mod:`benchmarks.suite`).

A benchmark defines rows (:class:`Row`: set up outside, a timed body; :class:`Command`: a
function in a fresh process) and the ratios it wants (:class:`Line`, :func:`ratio`); the
runner takes turns between the rows round by round after a warm-up (:func:`measure`), records
wall and CPU seconds (and peak RSS for child processes), prints one table per section with
min / median / max per figure, and writes JSON with ``--json PATH`` (:class:`Bench`).
"""

from benchmarks.runner.measure import Results, RowResult, Sample, measure
from benchmarks.runner.report import Bench, Line, add_json_argument, format_number, ratio, table
from benchmarks.runner.rows import Command, Row, Run, tree_cpu_seconds

__all__ = [
    "Bench",
    "Command",
    "Line",
    "Results",
    "Row",
    "RowResult",
    "Run",
    "Sample",
    "add_json_argument",
    "format_number",
    "measure",
    "ratio",
    "table",
    "tree_cpu_seconds",
]
