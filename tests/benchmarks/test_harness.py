import json
import os
import statistics

import numpy as np
import pytest
import torch
from PIL import Image

from benchmarks.errors import BenchConfigError
from benchmarks.harness.consumers import ModelStep, parse_consumer
from benchmarks.harness.report import REPORT_KEYS, STRATEGY_KEYS
from benchmarks.harness.run import run_benchmark
from benchmarks.harness.strategies import STRATEGIES, RunConfig, Strategy, get_strategy, register

PLOTS = ("throughput.png", "utilisation.png", "step_times.png")
TAB_BLUE, TAB_ORANGE = (31, 119, 180), (255, 127, 14)  # matplotlib's first two colours


def _pixels_near(path, rgb, tol=40):
    """Return the size of a PNG and how many of its pixels are within ``tol`` of ``rgb``."""
    with Image.open(path) as im:
        assert im.format == "PNG"
        pixels = np.asarray(im.convert("RGB")).astype(int)
        return im.size, int((np.abs(pixels - rgb).max(-1) <= tol).sum())


@pytest.fixture
def missing_backend_strategy():
    @register
    class Missing(Strategy):
        name = "test-missing"
        requires = ("no_such_backend_for_nostall",)

        def open(self, cfg):
            raise AssertionError("never opened")

    yield Missing.name
    del STRATEGIES[Missing.name]


def test_end_to_end_run_writes_every_report_file(
    tiny_data, tiny_store, tmp_path, missing_backend_strategy
):
    out = tmp_path / "report"
    _, paths = run_benchmark(
        str(tiny_data),
        out,
        store=str(tiny_store),
        strategies=["workers", "precompute", missing_backend_strategy],
        epochs=2,
        batch_size=8,
        workers=1,
        size=32,
        consumer="fixed:2",
    )
    # the plots show the two strategies that ran: their bars, one utilisation panel each
    # (180 px high; how much line a panel holds depends on how many samples a run this short
    # got, so only the panels are checked), their step-time boxes with medians
    size, bars = _pixels_near(out / "throughput.png", TAB_BLUE)
    assert size == (600, 350) and bars > 1000
    size, _ = _pixels_near(out / "utilisation.png", TAB_BLUE)
    assert size == (700, 2 * 180)
    size, medians = _pixels_near(out / "step_times.png", TAB_ORANGE)
    assert size == (600, 350) and medians > 10
    doc = json.loads((out / "report.json").read_text())
    assert set(REPORT_KEYS) <= set(doc)
    by_name = {s["name"]: s for s in doc["strategies"]}
    for name in ("workers", "precompute"):
        s = by_name[name]
        assert s["status"] == "ok", s.get("reason")
        assert set(STRATEGY_KEYS) <= set(s)
        assert s["samples"] == (2 * (48 // 8) - 2) * 8  # 2 epochs minus 2 warm-up steps
        assert s["samples_per_s"] == statistics.median(s["samples_per_s_epochs"]) > 0
        assert len(s["samples_per_s_epochs"]) == 2 and s["epoch_samples"] == 48
        assert s["cpu_s_per_sample"] > 0
        assert 0 <= s["data_wait_share"] <= 1
        assert s["peak_rss_bytes"] > 50 * 2**20  # a process that imported torch
        assert s["util_source"] == ("gpu_util" if torch.cuda.is_available() else "cpu_percent")
    missing = by_name[missing_backend_strategy]
    assert missing["status"] == "unavailable"
    assert "no_such_backend_for_nostall" in missing["reason"]
    assert doc["build"]["status"] == "given"
    assert "records no source fingerprint" in doc["build"]["warning"]  # written from arrays
    assert doc["break_even"]["precompute"]["detail"] == "build time unknown"
    assert doc["environment"]["cores_usable"] == len(os.sched_getaffinity(0))
    md = paths["md"].read_text()
    base = by_name["workers"]["samples_per_s"]
    for name in ("workers", "precompute"):
        sps = by_name[name]["samples_per_s"]
        assert f"| {name} | {sps:.1f} | {sps / base:.2f}x |" in md  # the table shows the JSON
        for line in by_name[name]["advice"]:
            assert f"- **{name}**: {line}\n" in md
    assert "- precompute pays for itself after: build time unknown" in md
    assert "- Warning: --store" in md
    assert by_name["workers"]["loader"]["settings"]["num_workers"] == 1
    assert by_name["precompute"]["loader"]["kind"] == "storeloader"
    assert all(by_name[n]["advice"] for n in ("workers", "precompute"))
    assert "## Advice for each loader's own settings" in md
    assert "unavailable: no_such_backend_for_nostall" in md.replace("`", "")
    if not torch.cuda.is_available():
        assert "not available: no GPU" in md


def test_workers_batches_are_training_ready(tiny_data):
    cfg = RunConfig(str(tiny_data), None, batch_size=8, workers=0, size=24)
    source = get_strategy("workers").open(cfg)
    try:
        first = [(x.clone(), y.clone()) for x, y in source.epoch(0)]
        again = [(x.clone(), y.clone()) for x, y in source.epoch(0)]
        other = next(iter(source.epoch(1)))
    finally:
        source.close()
    assert len(first) == 6
    x, y = first[0]
    assert x.shape == (8, 3, 24, 24) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert -3 < float(x.mean()) < 3 and float(x.std()) > 0.05  # normalised, not raw 0..255
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again, strict=True))  # pure of seed
    assert not torch.equal(first[0][0], other[0])  # another epoch: another order/augmentation
    labels = torch.cat([b[1] for b in first])
    assert sorted(labels.tolist()) == sorted(i % 3 for i in range(48))


def test_model_consumer_trains():
    torch.manual_seed(0)
    step = ModelStep(num_classes=2, device=torch.device("cpu"))
    images = torch.randn(16, 3, 24, 24)
    labels = (images[:, 0].mean((1, 2)) > 0).long()
    losses = []
    for _ in range(30):
        step(images, labels)
        losses.append(step.last_loss)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def test_bad_options_are_named(tiny_data, tmp_path):
    with pytest.raises(BenchConfigError, match="fixed:abc"):
        parse_consumer("fixed:abc", torch.device("cpu"), 2)
    with pytest.raises(BenchConfigError, match="nope"):
        run_benchmark(str(tiny_data), tmp_path, strategies=["nope"])
    with pytest.raises(BenchConfigError, match="batch_size"):
        RunConfig(str(tiny_data), None, batch_size=0, workers=0, size=8)


def test_a_failing_strategy_is_reported_and_the_run_goes_on(tiny_data, tmp_path):
    @register
    class Broken(Strategy):
        name = "test-broken"

        def open(self, cfg):
            raise OSError(f"{cfg.data}: disk on fire")

    try:
        report, _ = run_benchmark(
            str(tiny_data),
            tmp_path,
            strategies=["test-broken", "workers"],
            epochs=1,
            batch_size=8,
            workers=0,
            size=16,
        )
    finally:
        del STRATEGIES["test-broken"]
    broken, workers = report["strategies"]
    assert broken["status"] == "failed" and "disk on fire" in broken["reason"]
    assert workers["status"] == "ok" and workers["samples"] == (48 // 8 - 2) * 8
    assert "failed: setup: OSError" in (tmp_path / "report.md").read_text()


def test_epoch_time_counts_the_samples_an_epoch_serves(tiny_data, tmp_path):
    report, _ = run_benchmark(
        str(tiny_data),
        tmp_path,
        strategies=["workers"],
        epochs=1,
        batch_size=10,
        workers=0,
        size=16,
    )
    s = report["strategies"][0]
    assert s["epoch_samples"] == 40  # 48 samples, drop_last: 4 batches of 10
    assert s["epoch_s"] == pytest.approx(40 / s["samples_per_s"])


def test_max_seconds_starts_no_epoch_after_it_and_the_first_always_runs(tiny_data):
    from benchmarks.harness.loop import RunOptions, run_strategy

    cfg = RunConfig(str(tiny_data), None, 10, 0, 16, 0, "cpu")
    consumer = parse_consumer("none", torch.device("cpu"), 4)
    capped = run_strategy("workers", cfg, consumer, RunOptions(epochs=4, max_seconds=0.0))
    assert capped["status"] == "ok" and capped["epochs_run"] == 1
    full = run_strategy("workers", cfg, consumer, RunOptions(epochs=3))
    assert full["epochs_run"] == 3
    # two more whole epochs of 40 (drop_last: 4 batches of 10); the warm-up is the same
    assert full["samples"] - capped["samples"] == 80
    assert len(full["samples_per_s_epochs"]) == 3 and len(capped["samples_per_s_epochs"]) == 1


def test_a_busy_machine_is_only_claimed_from_enough_monitor_samples():
    """One 0.1 s sample of a very short run is no ground for "its throughput is understated"."""
    from benchmarks.harness.report import _caveats

    def strategy(name, samples):
        series = {"machine_cpu_percent": [90.0] * samples, "cpu_percent": [30.0] * samples}
        return {
            "name": name,
            "cpu_percent_mean": 30.0,
            "machine_cpu_percent_mean": 90.0,
            "monitor": {"series": series},
        }

    report = {
        "config": {"consumer": "fixed:5", "device": "cpu"},
        "strategies": [strategy("short", 1), strategy("long", 5)],
    }
    said = "".join(_caveats(report))
    assert "during `long` other processes used about 60% of the machine" in said
    assert "`short`" not in said


def test_spikes_once_an_epoch_are_explained_as_the_epoch_in_the_run_report():
    """bench5: 'recur every 6 steps ... each worker delivers every 2th batch', 6 the epoch."""
    from torch.utils.data import DataLoader, TensorDataset

    from benchmarks.harness.loop import RunOptions, _Timing, summarize
    from benchmarks.harness.report import _verdict_lines
    from loaders.diagnostics.monitor import MonitorResult

    opts = RunOptions(epochs=5, warmup_steps=2)
    steps = [(0.04 if i % 6 == 0 else 0.001, 0.02) for i in range(30)]  # 5 epochs of 6 steps
    tm = _Timing(steps=30, samples=240, warm_t=0.0, end_t=1.0, epochs_run=5)
    tm.wait_cpu, tm.pass_starts = [0.0] * 30, [0, 6, 12, 18, 24]
    res = MonitorResult(steps=steps, wall_s=1.0, cpu_s=0.5)
    data = TensorDataset(torch.zeros(48, 1))
    loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)
    out = summarize("workers", tm, res, opts, 48, loader)
    assert out["wait_period_steps"] == 6 and out["verdict"]["checks"][2]["ok"] is False
    said = " ".join([out["stalls"], *out["advice"]])
    assert "once a pass (6 steps, the length of one pass over the loader)" in out["stalls"]
    assert "delivers" not in said and "finish their batches together" not in said
    line = _verdict_lines([out])[0]
    assert line.endswith(out["stalls"])
