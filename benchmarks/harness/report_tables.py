"""The report's tables, one form for every kind of data: figures, verdicts, ratios.

Per strategy: samples/s (and against ``workers``), samples per host CPU second, host CPU per
sample, data-wait share, step-time variation, the utilisation period, peak RSS, the first
batch, and the verdict; a strategy that did not run says why in its row (``unavailable``,
``not applicable``, ``failed``). The verdict table checks each measured strategy against the
three targets (GPU utilisation 70-90% and steady, data wait < 30% of the step, step time
varying < 20%). The ratios put ``precompute`` over every other measured strategy, in samples
per second and in samples per CPU second, from this one run.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "BASELINE",
    "RATIO_OF",
    "fmt",
    "markdown_table",
    "ratio_lines",
    "ratios",
    "verdict_table",
]

BASELINE = "workers"
RATIO_OF = "precompute"
TARGETS = (
    ("gpu_util", "GPU util 70-90%, steady"),
    ("data_wait", "data wait < 30%"),
    ("step_cv", "step CV < 20%"),
)


def fmt(value: float | None, spec: str = ".3g", none: str = "-") -> str:
    """Format a number, or ``none`` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f}"


def per_cpu_s(s: dict[str, Any]) -> float | None:
    """Samples per host CPU second of one strategy (None when not measured)."""
    cpu = s.get("cpu_s_per_sample")
    return 1.0 / cpu if cpu else None


def _cell(text: str) -> str:
    """Text as one table cell: no line break, no cell break."""
    return " ".join(text.split()).replace("|", "\\|")


COLUMNS = 11


def _row(s: dict[str, Any], base_sps: float | None) -> str:
    if s.get("status") != "ok":
        reason = _cell(str(s.get("reason", "")))
        return f"| {s['name']} | {s.get('status')}: {reason} |" + " |" * (COLUMNS - 2)
    sps = s.get("samples_per_s")
    ratio = f"{sps / base_sps:.2f}x" if sps and base_sps else "-"
    share, cv = s.get("data_wait_share"), s.get("step_cv")
    cpu = s.get("cpu_s_per_sample")
    return (
        f"| {s['name']} | {fmt(sps, '.1f')} | {ratio} | {fmt(per_cpu_s(s), '.1f')} | "
        f"{fmt(None if cpu is None else cpu * 1e3, '.2f')} | "
        f"{'-' if share is None else f'{share:.0%}'} | {'-' if cv is None else f'{cv:.0%}'} | "
        f"{fmt(s.get('oscillation_period_s'), '.2f', 'none')} | "
        f"{_mib(s.get('peak_rss_bytes'))} | {fmt(s.get('first_batch_s'), '.2f')} | "
        f"{s['verdict']['summary']} |"
    )


def markdown_table(strategies: list[dict[str, Any]]) -> str:
    """Return the per-strategy table in Markdown."""
    base = next((s for s in strategies if s["name"] == BASELINE and s.get("status") == "ok"), None)
    base_sps = base.get("samples_per_s") if base else None
    head = (
        "| strategy | samples/s | vs workers | samples/CPU s | CPU ms/sample | data wait | "
        "step CV | util period (s) | peak RSS MiB | first batch (s) | verdict |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    )
    return "\n".join([head, *(_row(s, base_sps) for s in strategies)])


def _ok(ok: bool | None) -> str:
    return "n/a" if ok is None else ("ok" if ok else "MISSED")


def verdict_table(strategies: list[dict[str, Any]]) -> str:
    """Each measured strategy against the three targets: ok / MISSED / n/a, with the figure."""
    head = "| strategy | " + " | ".join(t for _, t in TARGETS) + " |\n"
    head += "| --- |" + " --- |" * len(TARGETS)
    rows = []
    for s in strategies:
        if s.get("status") != "ok":
            continue
        checks = {c["name"]: c for c in s["verdict"]["checks"]}
        cells = [
            f"{_ok(checks[k]['ok'])}: {_cell(checks[k]['detail'])}" if k in checks else "-"
            for k, _ in TARGETS
        ]
        rows.append(f"| {s['name']} | " + " | ".join(cells) + " |")
    return "\n".join([head, *rows])


def ratios(strategies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``precompute`` over each other measured strategy: samples/s and samples per CPU second."""
    ok = {s["name"]: s for s in strategies if s.get("status") == "ok"}
    top = ok.get(RATIO_OF)
    if top is None:
        return []
    out = []
    for name, s in ok.items():
        if name == RATIO_OF:
            continue
        sps, cpu = s.get("samples_per_s"), per_cpu_s(s)
        out.append(
            {
                "of": RATIO_OF,
                "to": name,
                "samples_per_s": top["samples_per_s"] / sps if sps else None,
                "samples_per_cpu_s": (per_cpu_s(top) or 0.0) / cpu if cpu else None,
            }
        )
    return out


def ratio_lines(report: dict[str, Any]) -> list[str]:
    """One line per ratio (``report["ratios"]``)."""
    return [
        f"- {r['of']} / {r['to']}: {_times(r['samples_per_s'])} samples/s, "
        f"{_times(r['samples_per_cpu_s'])} samples per CPU second"
        for r in report.get("ratios", [])
    ] or ["- none: precompute and another strategy must both be measured"]


def _times(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f}x"
