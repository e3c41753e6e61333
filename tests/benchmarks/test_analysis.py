import numpy as np
import pytest

from loaders.diagnostics.analysis import (
    break_even_epochs,
    coefficient_of_variation,
    data_wait_share,
    dominant_period,
    verdict,
)


def on_off(period_s, dt=0.1, seconds=30.0, duty=0.5, noise=5.0, seed=0):
    t = np.arange(int(seconds / dt)) * dt
    rng = np.random.default_rng(seed)
    return np.where((t % period_s) < duty * period_s, 95.0, 5.0) + rng.normal(0, noise, t.size)


@pytest.mark.parametrize("period", [0.5, 1.0, 2.0, 3.7, 6.0])
def test_oscillation_detector_finds_the_period_of_an_on_off_signal(period):
    found = dominant_period(on_off(period), 0.1)
    assert found == pytest.approx(period, abs=0.1)


def test_oscillation_detector_finds_short_bursts():
    # a GPU busy 20% of the time in bursts every 1.5 s (data-starved pattern)
    assert dominant_period(on_off(1.5, duty=0.2), 0.1) == pytest.approx(1.5, abs=0.1)


def test_no_period_for_noise_flat_or_short_series():
    rng = np.random.default_rng(1)
    assert dominant_period(rng.normal(50, 5, 300), 0.1) is None
    assert dominant_period([70.0] * 300, 0.1) is None
    assert dominant_period([0, 100, 0, 100], 0.1) is None
    assert dominant_period([None] * 50, 0.1) is None


def test_data_wait_share_and_cv():
    steps = [(0.3, 0.7)] * 10
    assert data_wait_share(steps) == pytest.approx(0.3)
    assert data_wait_share([]) is None
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(0.5)
    assert coefficient_of_variation([1.0]) is None


def test_break_even_epochs():
    assert break_even_epochs(30.0, 20.0, 5.0) == pytest.approx(2.0)
    assert break_even_epochs(30.0, 5.0, 20.0) is None  # the store is slower: never
    assert break_even_epochs(None, 20.0, 5.0) is None


def test_verdict_without_gpu_says_gpu_not_available():
    v = verdict([(0.08, 0.02)] * 20)
    assert v["bound"] == "data"
    checks = {c["name"]: c for c in v["checks"]}
    assert checks["gpu_util"]["ok"] is None
    assert "no GPU" in checks["gpu_util"]["detail"]
    assert checks["data_wait"]["ok"] is False
    assert checks["step_cv"]["ok"] is True


def test_verdict_with_gpu_series_checks_range_and_steadiness():
    steps = [(0.001, 0.05)] * 20
    good = verdict(steps, [80.0, 82.0, 79.0, 81.0] * 10)
    assert good["bound"] == "compute"
    assert all(c["ok"] for c in good["checks"])
    bursty = verdict(steps, list(on_off(1.0, seconds=4.0)))
    gpu = next(c for c in bursty["checks"] if c["name"] == "gpu_util")
    assert gpu["ok"] is False and "unsteady" in gpu["detail"]


def test_two_sample_alternation_is_not_a_period_unless_allowed():
    alternating = [90.0, 10.0] * 50
    assert dominant_period(alternating, 0.1) is None  # aliasing at the sampling rate
    assert dominant_period(alternating, 1.0, min_lag=2) == 2.0  # e.g. two workers taking turns
