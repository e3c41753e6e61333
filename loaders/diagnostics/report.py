"""The diagnosis a :class:`~loaders.diagnostics.diagnose.Diagnose` run returns, and its text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loaders.diagnostics.advice import OTHERS_BUSY, explain_stalls
from loaders.diagnostics.evidence import Evidence
from loaders.diagnostics.loader_info import OTHER, LoaderInfo

__all__ = ["Diagnosis"]


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}"


@dataclass
class Diagnosis:
    """What the wrapper measured and concluded.

    Attributes:
        steps: Steps measured after warm-up.
        samples_per_s: Delivered samples per second (None if batch sizes are unknown).
        data_wait_share: Share of step time blocked waiting for data.
        step_cv: Coefficient of variation of step times.
        cpu_percent: Mean process-tree CPU use, % of the machine.
        machine_cpu_percent: Mean CPU use of the whole machine (every process), %.
        verdict: :func:`loaders.diagnostics.analysis.verdict` output.
        recommendation: What to change, with the measured reason.
        note: The monitor's note (e.g. "no GPU: CPU metrics only (...)").
        wait_period_steps: Period, in steps, of recurring data-wait spikes (None if none).
        evidence: The figures the advice is based on.
        loader: The wrapped loader's kind and settings.
    """

    steps: int
    samples_per_s: float | None
    data_wait_share: float | None
    step_cv: float | None
    cpu_percent: float | None
    machine_cpu_percent: float | None
    verdict: dict[str, Any]
    recommendation: list[str] = field(default_factory=list)
    note: str = ""
    wait_period_steps: float | None = None
    evidence: Evidence | None = None
    loader: LoaderInfo = field(default_factory=lambda: LoaderInfo(OTHER, "unknown"))

    @property
    def bound(self) -> str:
        """``"data"``, ``"compute"`` or ``"unknown"``."""
        return str(self.verdict["bound"])

    def text(self) -> str:
        """Return the human-readable diagnosis."""
        lines = [f"nostall diagnosis over {self.steps} steps: {self.verdict['summary']}"]
        lines += [
            f"  {c['name']}: {'n/a' if c['ok'] is None else ('ok' if c['ok'] else 'MISSED')}"
            f" - {c['detail']}"
            for c in self.verdict["checks"]
        ]
        sps = "n/a" if self.samples_per_s is None else f"{self.samples_per_s:.1f}"
        lines.append(
            f"  measured: {sps} samples/s, data wait {_pct(self.data_wait_share)}, "
            f"step CV {_pct(self.step_cv)}"
        )
        lines += self._loader_lines()
        if self.wait_period_steps and self._step_cv_missed():  # else nothing to explain
            pass_steps = self.evidence.pass_steps if self.evidence else None
            lines.append(
                f"  data-wait spikes recur every {self.wait_period_steps:.0f} steps: "
                f"{explain_stalls(self.wait_period_steps, self.loader, pass_steps)}"
            )
        if self.note:
            lines.append(f"  {self.note}")
        lines += [f"  -> {r}" for r in self.recommendation]
        return "\n".join(lines)

    def _step_cv_missed(self) -> bool:
        return any(c["name"] == "step_cv" and c["ok"] is False for c in self.verdict["checks"])

    def _loader_lines(self) -> list[str]:
        settings = ", ".join(f"{k}={v}" for k, v in self.loader.settings.items())
        lines = [
            f"  loader: {self.loader.name} ({self.loader.kind})"
            + (f": {settings}" if settings else "")
        ]
        ev = self.evidence
        if ev is None:
            return lines
        work = [f"{ev.cores} usable cores"]
        if ev.wait_busy is not None:
            work.append(f"training thread on the CPU for {ev.wait_busy:.0%} of the data wait")
        if ev.helper_cores is not None and self.loader.helpers > 0:
            work.append(f"loader workers/threads use {ev.helper_cores:.2f} cores")
        if ev.storage_bytes is not None:
            work.append(f"{ev.storage_bytes / 1e6:.1f} MB fetched from storage (not the cache)")
        lines.append("  loading work: " + ", ".join(work))
        if ev.other_cpu_percent is not None and ev.other_cpu_percent > OTHERS_BUSY:
            lines.append(
                f"  other processes used about {ev.other_cpu_percent:.0f}% of the "
                "machine meanwhile: the loader had less CPU than the cores suggest"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "bound": self.bound,
            "steps": self.steps,
            "samples_per_s": self.samples_per_s,
            "data_wait_share": self.data_wait_share,
            "step_cv": self.step_cv,
            "verdict": self.verdict,
            "recommendation": list(self.recommendation),
            "wait_period_steps": self.wait_period_steps,
            "note": self.note,
            "loader": self.loader.to_dict(),
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }

    def print(self) -> None:
        """Print :meth:`text` (the report is meant for the console)."""
        print(self.text())
