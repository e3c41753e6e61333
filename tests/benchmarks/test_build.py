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


@pytest.mark.ray
@pytest.mark.slow
def test_end_to_end_section_times_fresh_pool_and_build_runs(tiny_data, tmp_path):
    from benchmarks.build_fresh import bench_end_to_end
    from precompute import open_store_info

    e2e = bench_end_to_end(tiny_data, tmp_path, size=16, shard=(8, 4), small=4, runs=1, cores=1)
    med = e2e["median"]
    assert set(med) == {"pool_small", "build_small", "pool_large", "build_large"}
    for row in med.values():  # every run is a fresh process: imports and start-up included
        assert row["seconds"] >= row["call_s"] > 0 and row["peak_rss_mb"] > 0
    assert e2e["fixed_cost_s"] == med["build_small"]["seconds"]
    for name in ("build_small", "build_large"):  # where the time went, from the build's report
        row = med[name]
        phases = (row["start_s"], row["shards_s"], row["stop_s"])
        assert min(phases) > 0 and sum(phases) == pytest.approx(row["call_s"], abs=0.01)
    assert e2e["ratio_end_to_end"] > 0
    info = open_store_info(tmp_path / "e2e_large.store")
    assert info.num_valid == 48 and info.report["shards_built"] == 6
