"""Write the benchmark report: ``report.json``, ``report.md``, the PNG plots and ``report.html``.

One form for every kind of data: the workload line (what every strategy serves), the
strategy table, the verdicts against the three targets, the ratios of ``precompute`` to each
other strategy, what each strategy ran (and left out), advice, the store's build and
break-even, the environment, the plots (:mod:`.report_tables`, :mod:`.report_plots`).

``report.html`` is ``report.md`` rendered by markdown-it-py (CommonMark and tables, raw HTML
off, so a path holding markup shows as text) with the plots embedded as base64 PNG data URIs:
one self-contained file to open or send.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from benchmarks.harness.report_tables import (
    BASELINE,
    fmt,
    markdown_table,
    ratio_lines,
    ratios,
    verdict_table,
)
from loaders.diagnostics.analysis import break_even_epochs

__all__ = [
    "REPORT_KEYS",
    "STRATEGY_KEYS",
    "add_break_even",
    "fmt",
    "markdown_table",
    "render_html",
    "render_markdown",
    "write_report",
]

REPORT_KEYS = (
    "environment",
    "config",
    "workload",
    "build",
    "strategies",
    "ratios",
    "break_even",
    "plots",
)
STRATEGY_KEYS = (
    "name",
    "status",
    "description",
    "samples_per_s",
    "data_wait_share",
    "step_cv",
    "oscillation_period_s",
    "cpu_s_per_sample",
    "peak_rss_bytes",
    "monitor_cpu_share",
    "verdict",
)
BUSY_MARGIN = 25.0  # machine CPU % above this run's that flags a shared, busy machine
STORE_STRATEGIES = ("precompute", "precompute-dali", "tf-store")


def add_break_even(report: dict[str, Any]) -> None:
    """Fill ``report["break_even"]``: epochs after which each store strategy pays off."""
    by_name = {s["name"]: s for s in report["strategies"] if s.get("status") == "ok"}
    base = by_name.get(BASELINE)
    build_s = (report.get("build") or {}).get("build_s")
    out: dict[str, Any] = {}
    for name in STORE_STRATEGIES:
        if name not in by_name:
            continue
        if base is None:
            out[name] = {"epochs": None, "detail": f"no {BASELINE} baseline measured"}
            continue
        store, base_s = by_name[name].get("epoch_s"), base.get("epoch_s")
        epochs = break_even_epochs(build_s, base_s, store)
        out[name] = {
            "epochs": epochs,
            "build_s": build_s,
            "epoch_s": store,
            "baseline_epoch_s": base_s,
            "detail": _break_even_text(build_s, base_s, store, epochs),
        }
    report["break_even"] = out


def _break_even_text(
    build_s: float | None, base: float | None, store: float | None, epochs: float | None
) -> str:
    if build_s is None:
        return "build time unknown"
    if epochs is None:
        return (
            f"never: an epoch takes {fmt(store)} s from the store vs {fmt(base)} s with {BASELINE}"
        )
    return (
        f"{fmt(build_s)} s build / ({fmt(base)} - {fmt(store)}) s saved per epoch = "
        f"{epochs:.2f} epochs"
    )


def _env_lines(env: dict[str, Any]) -> list[str]:
    gpu = env["gpu"]
    vers = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    return [
        f"- CPU: {env['cpu']}; cores: {env['cores_usable']} usable / {env['cores_logical']} "
        f"logical / {env['cores_physical']} physical; memory {env['memory_gib']} GiB",
        f"- GPU: {gpu.get('name') or 'none'}; driver {gpu.get('driver') or '-'}; "
        f"NVML: {gpu.get('nvml')}; CUDA available: {gpu.get('cuda_available')}",
        f"- {env['os']}, Python {env['python']}; {vers}",
    ]


def _build_lines(build: dict[str, Any] | None, break_even: dict[str, Any]) -> list[str]:
    if not build:
        return ["- no store used"]
    if build.get("status") in ("unavailable", "failed"):
        return [f"- store build {build['status']}: {build['reason']}"]
    lines = [
        f"- store `{build['store']}` ({build['status']})"
        + (f", per sample {build['codecs']}" if build.get("codecs") else "")
        + f": build time {fmt(build.get('build_s'), '.2f')} s"
        + (f" ({build['note']})" if build.get("note") else "")
    ]
    if build.get("warning"):
        lines.append(f"- Warning: {build['warning']}")
    lines += [f"- {name} pays for itself after: {v['detail']}" for name, v in break_even.items()]
    return lines


def _verdict_lines(strategies: list[dict[str, Any]]) -> list[str]:
    lines = []
    for s in strategies:
        if s.get("status") != "ok":
            continue
        cpu = (
            f"CPU {fmt(s.get('cpu_percent_mean'), '.0f')}% of the machine for this run, "
            f"{fmt(s.get('machine_cpu_percent_mean'), '.0f')}% for the whole machine"
        )
        stalls = f"; {s['stalls']}" if s.get("stalls") else ""
        lines.append(f"- **{s['name']}**: {s['verdict']['summary']}; {cpu}{stalls}")
    return lines


def _strategy_lines(strategies: list[dict[str, Any]], left_out: str | None) -> list[str]:
    lines = []
    loud = f"; **LEFT OUT: {left_out}**" if left_out else ""  # in every line, as in no batch
    for s in strategies:
        what = s.get("description") or f"{s.get('status')} (the table says why)"
        note = f" ({s['note']})" if s.get("note") else ""
        lines.append(f"- **{s['name']}**: {what}{note}{loud}")
    return lines


def _advice_lines(report: dict[str, Any]) -> list[str]:
    if report["config"]["consumer"] == "none":
        return ["- none with consumer `none`: every loader is data-bound by construction"]
    lines = []
    for s in report["strategies"]:
        if s.get("status") == "ok":
            lines += [f"- **{s['name']}**: {advice}" for advice in s.get("advice", [])]
    return lines


MIN_SAMPLES = 3  # monitor samples a strategy needs before its machine load is judged


def _series(strategy: dict[str, Any], name: str) -> list[Any]:
    """The monitor's series ``name`` of one strategy's figures (empty when absent)."""
    series = (strategy.get("monitor") or {}).get("series") or {}
    values = series.get(name)
    return list(values) if isinstance(values, list) else []


def _caveats(report: dict[str, Any]) -> list[str]:
    out = []
    if report["config"]["consumer"] == "none":
        out.append(
            "\nConsumer `none`: with no compute every loader is data-bound by construction; "
            "use `--consumer fixed:<ms>` or `model` for meaningful verdicts."
        )
    if report["config"]["consumer"] == "model" and report["config"]["device"] == "cpu":
        out.append(
            "\nConsumer `model` on CPU: the training step's own threads compete with the "
            "loader for the same cores, so throughput mixes loader cost and contention; "
            "on a GPU the step leaves the host cores to the loader."
        )
    if report["config"].get("torch_threads_caveat"):
        out.append(f"\nWarning: {report['config']['torch_threads_caveat']}")
    for s in report["strategies"]:
        run, machine = s.get("cpu_percent_mean"), s.get("machine_cpu_percent_mean")
        seen = [v for v in _series(s, "machine_cpu_percent") if v is not None]
        if len(seen) < MIN_SAMPLES:  # a run shorter than a few monitor samples: no verdict
            continue
        if run is not None and machine is not None and machine - run > BUSY_MARGIN:
            out.append(
                f"\nWarning: during `{s['name']}` other processes used about "
                f"{machine - run:.0f}% of the machine; its throughput is understated."
            )
    return out


def _policy(cfg: dict[str, Any]) -> str:
    policy = cfg.get("torch_threads_policy")
    return f" ({policy})" if policy else ""


def _overhead_line(strategies: list[dict[str, Any]]) -> str:
    shares = [s["monitor_cpu_share"] for s in strategies if s.get("monitor_cpu_share") is not None]
    if not shares:
        return "Monitor overhead: n/a"
    return (
        f"Monitor overhead (its sampling thread's CPU / wall time): at most "
        f"{100 * max(shares):.2f}% of one core."
    )


def _workload_lines(work: dict[str, Any]) -> list[str]:
    if not work:
        return []
    loud = [f"**Warning: {work['left_out']}.**", ""] if work.get("left_out") else []
    return [
        *loud,
        f"Workload: {work['task']}, {work['samples']} samples, fields "
        f"{', '.join(work['fields'])}"
        + (f" (stored: {work['stored_fields']})" if work.get("stored_fields") else "")
        + f"; every strategy serves {work['batch']}.",
        "",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """Return ``report.md``'s text."""
    cfg = report["config"]
    work = report.get("workload") or {}
    parts = [
        "# nostall benchmark report",
        "",
        f"Data `{cfg['data']}`, batch size {cfg['batch_size']}, stored sample "
        f"{work.get('stored') or str(cfg['size']) + ' px'}, "
        f"{cfg['epochs']} epoch(s) per strategy, {cfg['workers']} workers, consumer "
        f"`{cfg['consumer']}`, device `{cfg['device']}`, "
        f"{cfg.get('torch_threads', '-')} torch thread(s){_policy(cfg)}; the first "
        f"{cfg['warmup_steps']} steps are warm-up. Utilisation: " + report["util_note"],
        "",
        *_workload_lines(work),
        markdown_table(report["strategies"]),
        "",
        _overhead_line(report["strategies"]),
        *_caveats(report),
        "",
        "## Verdicts (targets: GPU util 70-90% and steady, data wait < 30%, step CV < 20%)",
        "",
        verdict_table(report["strategies"]),
        "",
        *_verdict_lines(report["strategies"]),
        "",
        "## Ratios (this run, side by side)",
        *ratio_lines(report),
        "",
        "## Strategies",
        *_strategy_lines(report["strategies"], work.get("left_out_fields")),
        "",
        "## Advice for each loader's own settings (loaders.diagnostics)",
        *_advice_lines(report),
        "",
        "## Store build",
        *_build_lines(report.get("build"), report["break_even"]),
        "",
        "## Environment",
        *_env_lines(report["environment"]),
        "",
        "## Plots",
        *(f"![{k}]({v})" for k, v in report["plots"].items()),
        "",
    ]
    return "\n".join(parts)


HTML_STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;max-width:72em;margin:1.5em auto;padding:0 1em}"
    "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 7px}"
    "th{background:#f4f4f4}code{font-size:12px}img{display:block;max-width:100%;margin:1em 0}"
)


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def render_html(report: dict[str, Any], out: str | Path) -> str:
    """Return ``report.html``'s text: ``report.md`` as HTML, its plots (in ``out``) embedded."""
    from markdown_it import MarkdownIt  # lazy: only writing a report needs it

    plots = {name: _data_uri(Path(out) / file) for name, file in report["plots"].items()}
    markdown = render_markdown({**report, "plots": plots})
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>nostall benchmark report</title>\n<style>{HTML_STYLE}</style>\n</head>\n"
        f"<body>\n{body}</body>\n</html>\n"
    )


def write_report(report: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write plots, ``report.json``, ``report.md`` and ``report.html`` into ``out``.

    Returns:
        Their paths: ``json``, ``md``, ``html``.
    """
    from benchmarks.harness.report_plots import write_plots

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    add_break_even(report)
    report["ratios"] = ratios(report["strategies"])
    report["plots"] = {k: p.name for k, p in write_plots(report["strategies"], out).items()}
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=1, default=str))
    paths["md"].write_text(render_markdown(report))
    paths["html"].write_text(render_html(report, out), encoding="utf-8")
    return paths
