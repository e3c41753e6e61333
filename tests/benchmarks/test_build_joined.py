"""The build benchmark's joined section: fresh builds that join a real ``ray start`` Ray."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from benchmarks.runner import measure
from benchmarks.suite.build.e2e import joined_rows
from benchmarks.suite.build.fresh import RunningRay
from precompute.runtime.raylocal import available_cpus
from tests.processes import running


@pytest.mark.ray
@pytest.mark.slow
def test_joined_builds_join_the_running_ray_which_is_gone_after(
    tiny_data: Path, tmp_path: Path
) -> None:
    ray = RunningRay(available_cpus())
    try:
        rows = joined_rows(tiny_data, tmp_path, ray, size=16, shard=(8, 4))
        got = measure(rows, runs=1, warmup=1)[rows[0].name]
    finally:
        ray.stop()
    samples = [*got.warmup, *got.runs]  # the first build on the Ray, then one more
    addresses = {s.extra["ray_address"] for s in samples}
    assert len(addresses) == 1 and "local" not in addresses  # both joined the same Ray
    for s in samples:
        assert s.figures["wall_s"] >= s.figures["call_s"] > 0 and s.figures["shards_s"] > 0
    left = [
        p for p in psutil.process_iter(["cmdline"]) if ray.tmp in " ".join(p.info["cmdline"] or [])
    ]
    assert running(left) == []  # every process of that Ray (its folder in their arguments)
    assert not Path(ray.tmp).exists()
