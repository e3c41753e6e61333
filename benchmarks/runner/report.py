"""The runner's output: a table per section, the lines derived from it, notes, and JSON.

Each section prints one table (min / median / max per figure), then its derived lines
(ratios); with ``--json PATH`` every figure of every run is written as JSON at the end.

A benchmark script builds a :class:`Bench`, prints its setup with :meth:`Bench.note` and
measures each section with :meth:`Bench.measure`; leaving the ``with`` block writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from benchmarks.runner.measure import Results, RowResult, measure
from benchmarks.runner.rows import Command, Row

__all__ = ["Bench", "Line", "add_json_argument", "format_number", "ratio", "table"]

Stat = Literal["min", "median", "max"]
Format = str | Callable[[float], str]


@dataclass(frozen=True)
class Line:
    """A figure derived from a section's results, printed after its table as ``label value note``.

    Attributes:
        label: what it is, as users quote it (``ratio build/pool``).
        value: computes it from the results.
        fmt: a format string (``"{:.2f}x"``) or a function of the value.
        note: text after the value (a target), or a function of the value.
    """

    label: str
    value: Callable[[Results], float]
    fmt: Format = "{:.2f}"
    note: Format = ""

    def render(self, results: Results) -> tuple[str, float]:
        """Return (the printed line, the value)."""
        value = self.value(results)
        text = _apply(self.fmt, value)
        note = _apply(self.note, value)
        return f"{self.label} {text}" + (f" {note}" if note else ""), value


def _apply(fmt: Format, value: float) -> str:
    return fmt(value) if callable(fmt) else fmt.format(value)


def ratio(
    label: str,
    num: str,
    den: str,
    figure: str = "rate",
    stat: Stat = "median",
    fmt: Format = "{:.2f}x",
    note: Format = "",
) -> Line:
    """A :class:`Line`: ``stat`` of ``figure`` of row ``num`` over that of row ``den``."""

    def value(results: Results) -> float:
        a = getattr(results[num], stat)(figure)
        b = getattr(results[den], stat)(figure)
        return float(a / b) if b else float("nan")

    return Line(label, value, fmt, note)


def format_number(value: float) -> str:
    """Four significant digits below 1,000, whole numbers with separators above."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _label(figure: str, unit: str) -> str:
    plural = unit + ("es" if unit.endswith(("ch", "sh", "s", "x")) else "s")
    labels = {"rate": f"{plural}/s", "ms": f"ms/{unit}", "cpu_ms": f"CPU ms/{unit}"}
    return labels.get(figure, figure)


def table(results: Results) -> list[str]:
    """One line per row and shown figure: row, figure, min, median, max of the timed runs."""
    shown = [
        (name, figure, _label(figure, row.unit))
        for name, row in results.items()
        for figure in row.show
        if figure in row.figures()
    ]
    width = max((len(name) for name in results), default=3)
    fig_width = max([len(label) for _, _, label in shown] + [16])
    lines = [f"  {'row':<{width}}  {'figure':<{fig_width}}{'min':>14}{'median':>14}{'max':>14}"]
    for name, figure, label in shown:
        row = results[name]
        stats = (row.min(figure), row.median(figure), row.max(figure))
        cells = "".join(f"{format_number(v):>14}" for v in stats)
        lines.append(f"  {name:<{width}}  {label:<{fig_width}}{cells}")
    return lines


def _row_json(row: RowResult) -> dict[str, Any]:
    summary = {
        f: {"min": row.min(f), "median": row.median(f), "max": row.max(f)} for f in row.figures()
    }
    return {
        "unit": row.unit,
        "summary": summary,
        "runs": [{**s.figures, **s.extra} for s in row.runs],
        "warmup": [{**s.figures, **s.extra} for s in row.warmup],
    }


class Bench:
    """One benchmark invocation: prints each section as it is measured; JSON at the end.

    Args:
        name: the benchmark's name (``loader``), recorded in the JSON.
        json_path: where to write the JSON (``--json``); ``None`` writes none.
    """

    def __init__(self, name: str, json_path: str | Path | None = None) -> None:
        self.name = name
        self.json_path = Path(json_path) if json_path is not None else None
        self.notes: list[str] = []
        self.sections: list[dict[str, Any]] = []

    def __enter__(self) -> Bench:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.write()

    def note(self, *lines: str) -> None:
        """Print setup or context lines (environment, sizes, values that are not timings)."""
        for line in lines:
            print(line, flush=True)
            self.notes.append(line)

    def measure(
        self,
        title: str,
        rows: Sequence[Row | Command],
        *,
        runs: int,
        warmup: int = 1,
        lines: Sequence[Line] = (),
        interleave: bool = True,
    ) -> Results:
        """Measure ``rows`` (:func:`measure`); print the title, the table and ``lines``."""
        results = measure(rows, runs, warmup, interleave)
        self.report(title, results, lines, runs=runs, warmup=warmup, interleave=interleave)
        return results

    def report(
        self, title: str, results: Results, lines: Sequence[Line] = (), **about: Any
    ) -> None:
        """Print (and keep for the JSON) a section measured with :func:`measure` directly."""
        runs, warmup = about.get("runs"), about.get("warmup")
        order = "rows interleaved" if about.get("interleave", True) else "one row after another"
        turns = f"{runs} run{'s' * (runs != 1)} after {warmup} warm-up, {order}"
        print(f"\n{title}" + (f" ({turns})" if about else ""))
        print("\n".join(table(results)))
        derived = []
        for line in lines:
            text, value = line.render(results)
            print(text)
            derived.append({"label": line.label, "value": value, "text": text})
        rows = {name: _row_json(row) for name, row in results.items()}
        self.sections.append({"title": title, **about, "rows": rows, "lines": derived})

    def write(self) -> None:
        """Write every section, line and note as JSON to ``json_path`` (if one was given)."""
        if self.json_path is None:
            return
        doc = {"benchmark": self.name, "notes": self.notes, "sections": self.sections}
        self.json_path.write_text(json.dumps(doc, indent=1, default=str))


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--json PATH`` (every figure of every run, as JSON) to a script's parser."""
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
