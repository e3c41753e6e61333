"""Reading the benchmark runner's printed tables back in the smoke tests."""

from __future__ import annotations

import math
import re


def figure_values(out: str, row: str, figure: str) -> list[float]:
    """(min, median, max) of ``figure`` of ``row`` in the runner's printed table(s) ``out``."""
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 5 and cells[0] == row and cells[1] == figure:
            return [float(c.replace(",", "")) for c in cells[2:]]
    raise AssertionError(f"no {figure!r} of row {row!r} in:\n{out}")


def assert_positive(out: str, row: str, figure: str) -> list[float]:
    """Assert that ``figure`` of ``row`` was printed, finite and positive; return it."""
    values = figure_values(out, row, figure)
    assert all(math.isfinite(v) and v > 0 for v in values), (row, figure, values)
    return values
