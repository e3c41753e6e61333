"""The report's PNG plots (matplotlib, Agg backend): throughput, utilisation, step times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_plots"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(strategies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in strategies if s.get("status") == "ok"]


def _throughput(plt: Any, strategies: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [s["name"] for s in strategies]
    ax.bar(names, [s.get("samples_per_s") or 0 for s in strategies], color="tab:blue")
    ax.set_ylabel("samples / s")
    ax.set_title("Throughput per strategy")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _utilisation(plt: Any, strategies: list[dict[str, Any]], path: Path) -> None:
    fig, axes = plt.subplots(
        len(strategies) or 1,
        1,
        figsize=(7, 1.8 * max(1, len(strategies))),
        squeeze=False,
        sharex=True,
    )
    for ax, s in zip(axes[:, 0], strategies, strict=False):
        series = s["monitor"]["series"]
        key = s["util_source"]
        values = [v if v is not None else float("nan") for v in series[key]]
        ax.plot(series["t"], values, lw=1, label="GPU util" if key == "gpu_util" else "this run")
        if key == "cpu_percent" and "machine_cpu_percent" in series:
            ax.plot(
                series["t"],
                series["machine_cpu_percent"],
                lw=0.8,
                ls="--",
                color="grey",
                label="whole machine",
            )
            ax.legend(fontsize=7, loc="upper right")
        ax.set_ylim(0, 105)
        label = "GPU util %" if key == "gpu_util" else "CPU %"
        period = s.get("oscillation_period_s")
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(f"{s['name']}" + (f" (period {period:.2f} s)" if period else ""), fontsize=9)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _step_times(plt: Any, strategies: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    data = [[1e3 * (w + c) for w, c in s["monitor"]["steps"]] or [0.0] for s in strategies]
    if data:
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(data) + 1), [s["name"] for s in strategies])
    ax.set_ylabel("step time (ms)")
    ax.set_title("Step-time distribution")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(strategies: list[dict[str, Any]], out: Path) -> dict[str, Path]:
    """Write ``throughput.png``, ``utilisation.png`` and ``step_times.png`` into ``out``."""
    plt = _pyplot()
    ok = _ok(strategies)
    paths = {
        "throughput": out / "throughput.png",
        "utilisation": out / "utilisation.png",
        "step_times": out / "step_times.png",
    }
    _throughput(plt, ok, paths["throughput"])
    _utilisation(plt, ok, paths["utilisation"])
    _step_times(plt, ok, paths["step_times"])
    return paths
