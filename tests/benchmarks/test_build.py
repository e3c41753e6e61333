import json

import pytest

from benchmarks.harness.run import run_benchmark


@pytest.fixture
def local_ray(ray_local):
    return ray_local


@pytest.mark.ray
@pytest.mark.slow
def test_run_without_store_builds_one_and_measures_the_build(tiny_data, tmp_path, local_ray):
    out = tmp_path / "report"
    report, _ = run_benchmark(
        str(tiny_data),
        out,
        strategies=["workers", "precompute"],
        epochs=1,
        batch_size=8,
        workers=1,
        size=32,
    )
    build = report["build"]
    assert build["status"] == "built", build
    assert build["build_s"] > 0 and build["num_valid"] == 48
    assert (out / "store.zarr" / "zarr.json").is_file()
    doc = json.loads((out / "report.json").read_text())
    be = doc["break_even"]["precompute"]
    assert be["build_s"] == pytest.approx(build["build_s"])
    assert "epochs" in be and be["detail"]
    # a second run reuses the store and its recorded build time
    again, _ = run_benchmark(
        str(tiny_data), out, strategies=["precompute"], epochs=1, batch_size=8, workers=1, size=32
    )
    assert again["build"]["status"] == "reused" and again["build"]["build_s"] > 0
    [row] = again["strategies"]  # measured on the reused store, not "unavailable: no store"
    assert row["name"] == "precompute" and row["status"] == "ok", row
    # a store of another size at that place is not reused as if it were this run's
    other, _ = run_benchmark(
        str(tiny_data), out, strategies=["precompute"], epochs=1, batch_size=8, workers=1, size=16
    )
    assert other["build"]["status"] == "failed"
    assert "holds a store of other data or settings (StoreMismatchError" in other["build"]["reason"]
    assert other["strategies"][0]["status"] != "ok"


@pytest.mark.ray
@pytest.mark.slow
def test_end_to_end_section_times_fresh_pool_and_build_runs(tiny_data, tmp_path):
    from benchmarks.runner import measure
    from benchmarks.suite.build.e2e import end_to_end_lines, end_to_end_rows
    from precompute import open_store_info

    rows = end_to_end_rows(tiny_data, tmp_path, size=16, shard=(8, 4), small=4, cores=1)
    res = measure(rows, runs=1, warmup=0)
    assert list(res) == ["pool_small", "build_small", "pool_large", "build_large"]
    for row in res.values():  # every run is a fresh process: imports and start-up included
        got = row.runs[0].figures
        assert got["wall_s"] >= got["call_s"] > 0 and got["imports_s"] > 0
        assert got["tree_peak_rss_mib"] > 0 and got["cpu_s"] > 0
    for name in ("build_small", "build_large"):  # where the time went, from the build's report
        got = res[name].runs[0].figures
        phases = (got["start_s"], got["shards_s"], got["stop_s"])
        assert min(phases) > 0 and sum(phases) == pytest.approx(got["call_s"], abs=0.01)
    fixed, end_to_end, _ = (line.render(res)[1] for line in end_to_end_lines(4))
    assert fixed == res["build_small"].median("wall_s") and end_to_end > 0
    info = open_store_info(tmp_path / "e2e_large.store")
    assert info.num_valid == 48 and info.report["shards_built"] == 6
