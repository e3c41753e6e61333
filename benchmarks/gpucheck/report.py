"""The check's report: ``report.md``, ``report.json`` and the harness's plots of the trained runs.

Tables are :func:`benchmarks.harness.report.markdown_table`'s and the plots
:func:`benchmarks.harness.report_plots.write_plots`' (throughput, utilisation over time,
step times), so the check reads like ``python -m benchmarks run``. Every figure is one
measured in this run; what was not measured reads ``-`` or says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.report import fmt, markdown_table
from benchmarks.harness.report_plots import write_plots

__all__ = ["render", "summary_lines", "utilisation", "write"]


def utilisation(s: dict[str, Any]) -> dict[str, Any]:
    """Mean, spread (std) and oscillation period of a run's utilisation series."""
    key = s.get("util_source", "cpu_percent")
    vals = [v for v in s["monitor"]["series"].get(key, []) if v is not None]
    return {
        "source": key,
        "mean": float(np.mean(vals)) if vals else None,
        "std": float(np.std(vals)) if vals else None,
        "period_s": s.get("oscillation_period_s"),
        "samples": len(vals),
    }


def _ok(s: dict[str, Any]) -> bool:
    return s.get("status") == "ok"


def _ran(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in runs if _ok(s)]


def _tests_lines(t: dict[str, Any] | None) -> list[str]:
    if t is None:
        return ["- not run (--no-tests)"]
    c = t["counts"]
    lines = [
        f"- {c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} "
        f"skipped in {t['seconds']} s (pytest exit {t['exit_code']}; log: pytest.txt)",
    ]
    if t.get("problem"):
        lines.append(f"- NOT RUN: {t['problem']}")
    lines += [f"- FAILED `{k}`: {v}" for k, v in t["failed"].items()]
    reasons: dict[str, int] = {}
    for why in t["skipped"].values():
        reasons[why] = reasons.get(why, 0) + 1
    lines += [f"- skipped ({n}): {why}" for why, n in reasons.items()]
    by_why: dict[str, list[str]] = {}
    for node, why in t["cannot_run"].items():
        by_why.setdefault(why, []).append(node.split("::")[0])
    for why, nodes in by_why.items():
        files = ", ".join(f"`{f}`" for f in sorted(set(nodes)))
        lines.append(f"- cannot run here ({len(nodes)}): {why}: {files}")
    lines += [f"- module not imported: `{k}`: {v}" for k, v in t["uncollected"].items()]
    return lines


def _trained_lines(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for s in _ran(runs):
        u = utilisation(s)
        what = "GPU util" if u["source"] == "gpu_util" else "CPU (no GPU)"
        checks = "; ".join(
            f"{c['name']}: {'n/a' if c['ok'] is None else ('ok' if c['ok'] else 'MISSED')} "
            f"({c['detail']})"
            for c in s["verdict"]["checks"]
        )
        lines.append(
            f"- **{s['name']}**: {what} mean {fmt(u['mean'], '.0f')}%, spread (std) "
            f"{fmt(u['std'], '.0f')} points, oscillation period "
            f"{fmt(u['period_s'], '.2f', 'none')} s over {u['samples']} samples; {checks}"
        )
        lines += [f"  - advice: {a}" for a in s.get("advice", [])]
    return lines


def _not_ok(runs: list[dict[str, Any]]) -> list[str]:
    return [f"- {s['name']}: {s['status']}: {s.get('reason', '')}" for s in runs if not _ok(s)]


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The few lines that say what this run was and found (printed at the end of a run)."""
    cfg, b = report["config"], report["build"]
    lines = [
        f"device {cfg['device']}, data `{cfg['data']}`, {cfg['size']} px from {cfg['stored']} px, "
        f"batch {cfg['batch_size']}, {cfg['workers']} workers, model {report['model']['name']} "
        f"({report['model']['why']}); {report['seconds']:.0f} s of a "
        f"{cfg['budget_s']:.0f} s budget",
        f"store: {b['num_valid']} samples built in {b['build_s']:.1f} s by the sequential runner "
        f"(no Ray), {fmt(b['samples_per_s'], '.0f')} samples/s",
    ]
    if report["cuda_skipped"]:
        lines.append(
            " ".join(report["cuda_skipped"][:1]) + " " + "; ".join(report["cuda_skipped"][1:])
        )
    t = report.get("tests")
    if t:
        c = t["counts"]
        lines.append(
            f"gpu tests: {c['passed']} passed, {c['failed']} failed, {c['error']} errors, "
            f"{c['skipped']} skipped; {len(t['cannot_run'])} cannot run here (Ray/DALI), "
            f"{len(t['uncollected'])} modules not imported"
            + (f"; NOT RUN: {t['problem']}" if t.get("problem") else "")
        )
    for s in report.get("alone", []):
        lines.append(f"alone {s['name']}: " + _result(s, False))
    lines += _decode_summary(report.get("decode"))
    for s in report.get("trained", []):
        lines.append(f"trained {s['name']}: " + _result(s, True))
    return lines


def _decode_store(b: dict[str, Any]) -> str:
    ratio = b["raw_bytes_per_sample"] / b["image_bytes_per_sample"]
    return (
        f"decode: {b['codec']} store built in {b['build_s']:.1f} s, "
        f"{b['image_bytes_per_sample'] / 1024:.1f} KiB/image ({ratio:.1f}x smaller than raw)"
    )


def _decode_ratios(runs: list[dict[str, Any]]) -> list[str]:
    rates = {s["name"]: s["samples_per_s"] for s in runs if _ok(s)}
    raw = rates.get("decode-raw")
    return [
        f"{name} / decode-raw: {rates[name] / raw:.2f}x samples/s"
        for name in ("decode-device", "decode-cpu")
        if raw and name in rates
    ]


def _decode_summary(decode: dict[str, Any] | None) -> list[str]:
    """The decode row's lines: the JPEG store, each feed's rate, each against raw."""
    if decode is None:
        return []
    runs = [f"alone {s['name']}: " + _result(s, False) for s in decode["runs"]]
    return [_decode_store(decode["build"]), *runs, *_decode_ratios(decode["runs"])]


def _decode_lines(decode: dict[str, Any] | None) -> list[str]:
    """report.md's decode section."""
    if decode is None:
        return ["- not run (--no-decode)"]
    return [
        f"- {_decode_store(decode['build'])}",
        "",
        markdown_table(decode["runs"]),
        *_not_ok(decode["runs"]),
        "",
        *(f"- {line}" for line in _decode_ratios(decode["runs"])),
    ]


def _result(s: dict[str, Any], verdict: bool) -> str:
    if not _ok(s):
        return f"{s['status']}: {s.get('reason', '')}"
    return (
        f"{fmt(s['samples_per_s'], '.1f')} samples/s, "
        f"{fmt(_ms(s.get('cpu_s_per_sample')), '.2f')} CPU ms/sample"
        + (f", {s['verdict']['summary']}" if verdict else "")
    )


def _ms(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else 1e3 * v


def render(report: dict[str, Any]) -> str:
    """Return ``report.md``'s text."""
    cfg = report["config"]
    env = report["environment"]
    gpu = env["gpu"]
    return "\n".join(
        [
            "# nostall GPU check",
            "",
            *(f"- {line}" for line in summary_lines(report)),
            "",
            "## gpu tests (those that need neither Ray nor DALI)",
            *_tests_lines(report.get("tests")),
            "",
            "## Feeds alone (consumer `none`: loader throughput and host CPU cost)",
            "",
            markdown_table(report.get("alone", [])),
            *_not_ok(report.get("alone", [])),
            "",
            "## Decode (a jpeg:90 store decoded on the device, on the CPU reader threads; raw)",
            "",
            *_decode_lines(report.get("decode")),
            "",
            f"## Feeds under a training step (`{report['model']['name']}`)",
            "",
            markdown_table(report.get("trained", [])),
            *_not_ok(report.get("trained", [])),
            "",
            "Targets: GPU utilisation 70-90% and steady (CV < 15%), data wait < 30% of the "
            "step, step-time CV < 20%.",
            "",
            *_trained_lines(report.get("trained", [])),
            "",
            "## Environment",
            f"- CPU: {env['cpu']}, {env['cores_usable']} usable cores, {env['memory_gib']} GiB",
            f"- GPU: {gpu.get('name') or 'none'}; driver {gpu.get('driver') or '-'}; NVML: "
            f"{gpu.get('nvml')}; CUDA {gpu.get('cuda') or '-'} (available: "
            f"{gpu.get('cuda_available')})",
            f"- Python {env['python']}; "
            + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
            f"- config: epochs {cfg['epochs']} alone, {cfg['train_epochs']} trained, warm-up 2 "
            f"steps, monitor every {cfg['interval']} s",
            "",
            "## Plots (the trained runs)",
            *(f"![{k}]({v})" for k, v in report.get("plots", {}).items()),
            "",
        ]
    )


def write(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write the plots, ``report.json`` and ``report.md`` into ``out``; return their paths."""
    plots = write_plots(report.get("trained", []), out)
    report["plots"] = {k: p.name for k, p in plots.items()}
    paths = {"json": out / "report.json", "md": out / "report.md"}
    paths["json"].write_text(json.dumps(report, indent=1, default=str))
    paths["md"].write_text(render(report))
    return paths
