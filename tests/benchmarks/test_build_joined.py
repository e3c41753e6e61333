"""bench_build's joined section: fresh builds that join a real ``ray start`` Ray, then its end."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from benchmarks.build_fresh import RunningRay, bench_joined, medians
from precompute.raylocal import available_cpus
from tests.processes import running


def test_medians_skip_fields_that_are_not_numbers() -> None:
    rows = [{"seconds": 1.0, "ray_address": "local"}, {"seconds": 3.0, "ray_address": "local"}]
    assert medians(rows) == {"seconds": 2.0}


@pytest.mark.ray
@pytest.mark.slow
def test_joined_builds_join_the_running_ray_which_is_gone_after(
    tiny_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[RunningRay] = []
    real_init = RunningRay.__init__

    def spy(self: RunningRay, cpus: int) -> None:
        real_init(self, cpus)
        started.append(self)

    monkeypatch.setattr(RunningRay, "__init__", spy)
    rows = bench_joined(tiny_data, tmp_path, size=16, shard=(8, 4), runs=1, cpus=available_cpus())
    assert len(rows) == 2  # the first build on the Ray, then one more
    (ray,) = started
    addresses = {row["ray_address"] for row in rows}
    assert len(addresses) == 1 and "local" not in addresses  # both joined the same Ray
    for row in rows:
        assert row["seconds"] >= row["call_s"] > 0 and row["shards_s"] > 0
    left = [
        p for p in psutil.process_iter(["cmdline"]) if ray.tmp in " ".join(p.info["cmdline"] or [])
    ]
    assert running(left) == []  # every process of that Ray (its folder in their arguments)
    assert not Path(ray.tmp).exists()
