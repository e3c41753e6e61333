"""The training thread's torch pool while the harness measures, and the doctor's one core.

On a 2-core host torch's default pool (2 threads) beside two loader threads made the
``precompute`` row 10-20 times slower than with one thread (the speech review): ``run`` and
``doctor`` size it to the cores the loaders leave unless ``--torch-threads`` says otherwise,
restore it after, and name a larger pool in the report; the doctor's "1 core" decode runs one
thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from benchmarks.cli import bench
from benchmarks.harness.consumers import TorchThreads
from benchmarks.harness.doctor import decode_rate
from benchmarks.harness.run import run_benchmark
from benchmarks.harness.sources import plan_source
from benchmarks.harness.strategies import STRATEGIES, Strategy, register
from benchmarks.harness.workloads import choose
from precompute.spec import BuildSpec


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # torch's default on this 2-core host, wherever the test runs
    yield
    torch.set_num_threads(before)


def test_the_default_pool_is_the_cores_the_loaders_leave() -> None:
    assert TorchThreads.choose(None, 2, 2).threads == 1  # the loaders take every core
    assert TorchThreads.choose(None, 16, 4).threads == 12
    assert TorchThreads.choose(None, 4, 0).threads == 4
    assert TorchThreads.choose(None, 2, 2).caveat() is None
    given = TorchThreads.choose(2, 2, 2)
    assert given.threads == 2 and given.text == "--torch-threads 2"
    assert "rerun with `--torch-threads 1`" in (given.caveat() or "")
    assert TorchThreads.choose(1, 2, 2).caveat() is None


@pytest.fixture
def pool_probe() -> Iterator[list[int]]:
    seen: list[int] = []

    class Source:
        num_samples = 16

        def epoch(self, epoch: int) -> Iterator[Any]:
            for _ in range(4):
                seen.append(torch.get_num_threads())  # the pool a loader's torch ops get
                yield torch.zeros(4, 3, 8, 8), torch.zeros(4, dtype=torch.int64)

        def close(self) -> None:
            pass

    @register
    class Probe(Strategy):
        name = "test-pool"

        def open(self, cfg: Any) -> Source:
            return Source()

    yield seen
    del STRATEGIES[Probe.name]


def test_a_run_measures_with_the_policys_pool_and_restores_it(
    tiny_data: Any, tmp_path: Any, pool_probe: list[int], two_threads: None
) -> None:
    kw: dict[str, Any] = dict(strategies=["test-pool"], epochs=1, batch_size=4, size=16)
    report, paths = run_benchmark(str(tiny_data), tmp_path / "a", workers=2, **kw)
    assert set(pool_probe) == {max(1, report["environment"]["cores_usable"] - 2)}
    assert torch.get_num_threads() == 2  # the process's own setting, restored
    md = paths["md"].read_text()
    assert "less the 2 loader workers/threads, at least 1)" in md
    assert "--torch-threads 1" not in md  # no warning: the pool fits beside the loaders
    pool_probe.clear()
    report, paths = run_benchmark(str(tiny_data), tmp_path / "b", workers=2, torch_threads=3,
                                  **kw)  # fmt: skip
    assert set(pool_probe) == {3} and report["config"]["torch_threads"] == 3
    assert torch.get_num_threads() == 2
    md = paths["md"].read_text()
    assert "3 torch thread(s) (--torch-threads 3)" in md
    assert "Warning: torch ran 3 intra-op threads on the training thread beside 2 loader" in md
    assert "rerun with `--torch-threads 1`" in md


def test_the_doctors_one_core_decode_runs_one_thread(tiny_data: Any, two_threads: None) -> None:
    plan = plan_source(str(tiny_data), BuildSpec(size=16))
    workload = choose(plan)
    seen: list[int] = []
    classic = workload.classic

    class Recorded(type(workload)):  # type: ignore[misc]
        def classic(self, seed: int) -> Any:
            transform = classic(seed)

            def recorded(values: Any, rng: np.random.Generator) -> Any:
                seen.append(torch.get_num_threads())
                return transform(values, rng)

            return recorded

    dec = decode_rate(plan, Recorded(plan), 4)
    assert dec["samples"] == 4 and seen == [1, 1, 1, 1]
    assert torch.get_num_threads() == 2


def test_doctor_takes_torch_threads_as_run_does(tiny_data: Any) -> None:
    argv = ["doctor", "--data", str(tiny_data), "--max-files", "4", "--json"]
    given = json.loads(CliRunner().invoke(bench, [*argv, "--torch-threads", "3"]).output)
    assert given["torch_threads"] == {"threads": 3, "policy": "--torch-threads 3"}
    default = json.loads(CliRunner().invoke(bench, [*argv, "--workers", "2"]).output)
    cores = default["environment"]["cores_usable"]
    assert default["torch_threads"]["threads"] == max(1, cores - 2)
    text = CliRunner().invoke(bench, argv[:-1]).output
    assert "decode (1 core, 1 thread, 4 samples)" in text
