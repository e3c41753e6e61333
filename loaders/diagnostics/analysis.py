"""Pure functions that turn timings and utilisation series into figures and verdicts.

Targets (the usual ones from the GPU-utilisation threads): GPU utilisation 70-90% and steady,
data wait under 30% of step time, step-time coefficient of variation under 20%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DATA_WAIT_MAX",
    "GPU_UTIL_RANGE",
    "STEP_CV_MAX",
    "Verdict",
    "break_even_epochs",
    "coefficient_of_variation",
    "data_wait_share",
    "dominant_period",
    "verdict",
]

GPU_UTIL_RANGE = (70.0, 90.0)
DATA_WAIT_MAX = 0.30
STEP_CV_MAX = 0.20
GPU_STEADY_CV = 0.15  # utilisation counts as steady when its CV is below this


def data_wait_share(steps: Sequence[tuple[float, float]]) -> float | None:
    """Return total data wait / total step time, or None without steps."""
    wait = sum(w for w, _ in steps)
    total = wait + sum(c for _, c in steps)
    return wait / total if total > 0 else None


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Return std / mean of ``values`` (None for fewer than two values or a zero mean)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size < 2 or arr.mean() <= 0:
        return None
    return float(arr.std() / arr.mean())


def dominant_period(
    series: Sequence[float | None], dt: float, *, min_strength: float = 0.3, min_lag: int = 3
) -> float | None:
    """Return the dominant oscillation period of ``series`` in seconds, or None.

    Uses the autocorrelation: the period is the lag of its highest peak after the first zero
    crossing, accepted only if that peak's correlation is at least ``min_strength`` (so noise
    and flat series give None).

    Args:
        series: Evenly spaced samples (None entries are dropped).
        dt: Seconds between samples.
        min_strength: Minimum autocorrelation at the peak, in (0, 1].
        min_lag: Shortest period in samples that counts; a 2-sample "period" is usually the
            quantisation of CPU-time counters aliasing at the sampling rate, not a real cycle.
    """
    x = np.asarray([v for v in series if v is not None], dtype=np.float64)
    if x.size < 8 or dt <= 0:
        return None
    x = x - x.mean()
    denom = float(np.dot(x, x))
    if denom <= 1e-12 * x.size:
        return None
    n = x.size
    spec = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(spec * np.conj(spec))[:n] / denom
    # biased estimate: multiples of the period decay linearly, so the argmax is the fundamental
    max_lag = n // 2
    below = np.nonzero(acf[1:max_lag] < 0)[0]
    if below.size == 0:
        return None
    start = int(below[0]) + 1
    lag = start + int(np.argmax(acf[start:max_lag]))
    if acf[lag] < min_strength or lag >= max_lag - 1 or lag < min_lag:
        return None
    return float(lag * dt)


def break_even_epochs(
    build_s: float | None, epoch_s_baseline: float | None, epoch_s_store: float | None
) -> float | None:
    """Return after how many epochs a store's build time is paid back, or None if never.

    The store saves ``epoch_s_baseline - epoch_s_store`` seconds per epoch; the build costs
    ``build_s`` once.
    """
    if build_s is None or epoch_s_baseline is None or epoch_s_store is None:
        return None
    saving = epoch_s_baseline - epoch_s_store
    if saving <= 0:
        return None
    return build_s / saving


@dataclass(frozen=True)
class Verdict:
    """One check against a target: ``ok`` is None when the figure is not available."""

    name: str
    ok: bool | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def _check_gpu(gpu_util: Sequence[float | None] | None) -> Verdict:
    vals = [v for v in (gpu_util or []) if v is not None]
    if not vals:
        return Verdict("gpu_util", None, "not available: no GPU (CPU metrics only)")
    mean = float(np.mean(vals))
    cv = coefficient_of_variation(vals) if mean > 0 else None
    lo, hi = GPU_UTIL_RANGE
    steady = cv is not None and cv < GPU_STEADY_CV
    ok = lo <= mean <= hi and steady
    cv_txt = f"{cv:.0%}" if cv is not None else "n/a"
    return Verdict(
        "gpu_util",
        ok,
        f"mean {mean:.0f}% (target {lo:.0f}-{hi:.0f}%), "
        f"variation {cv_txt} ({'steady' if steady else 'unsteady'})",
    )


def verdict(
    steps: Sequence[tuple[float, float]], gpu_util: Sequence[float | None] | None = None
) -> dict[str, Any]:
    """Judge a run against the targets.

    Returns:
        ``{"bound": "data"|"compute"|"unknown", "checks": [...], "summary": str}``.
    """
    share = data_wait_share(steps)
    cv = coefficient_of_variation([w + c for w, c in steps])
    checks = [
        _check_gpu(gpu_util),
        Verdict(
            "data_wait",
            None if share is None else share < DATA_WAIT_MAX,
            "n/a"
            if share is None
            else f"{share:.0%} of step time waiting for data (target < {DATA_WAIT_MAX:.0%})",
        ),
        Verdict(
            "step_cv",
            None if cv is None else cv < STEP_CV_MAX,
            "n/a" if cv is None else f"step-time variation {cv:.0%} (target < {STEP_CV_MAX:.0%})",
        ),
    ]
    bound = "unknown" if share is None else ("data" if share >= DATA_WAIT_MAX else "compute")
    failed = [c.name for c in checks if c.ok is False]
    summary = f"{bound}-bound; " + (
        "all available targets met" if not failed else "missed: " + ", ".join(failed)
    )
    return {"bound": bound, "checks": [c.to_dict() for c in checks], "summary": summary}
