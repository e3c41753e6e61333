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


def figure_after(out: str, label: str, *, positive: bool = True) -> float:
    """The number printed right after ``label`` in ``out`` (``1.25x``, ``1/32.5``, ``3,017``).

    Asserts that the line was printed and the figure is finite, and positive unless
    ``positive`` is false (a difference of two timings, which noise may turn negative).
    """
    line = next((ln for ln in out.splitlines() if label in ln), None)
    assert line is not None, f"no line with {label!r} in:\n{out}"
    found = re.match(r"\s*(-?[0-9][0-9,]*(?:\.[0-9]+)?)(?:/([0-9.]+))?", line.split(label, 1)[1])
    assert found is not None, f"no figure after {label!r}: {line!r}"
    value = float(found.group(1).replace(",", ""))
    if found.group(2):  # 1/N
        value /= float(found.group(2))
    assert math.isfinite(value) and (value > 0 or not positive), (label, line)
    return value
