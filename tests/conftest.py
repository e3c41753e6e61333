"""Shared fixtures: markers that skip on missing hardware, and small real datasets."""

from __future__ import annotations

import importlib.util

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests without CUDA and `dali` tests without DALI, saying why."""
    no_gpu = pytest.mark.skip(reason="needs a CUDA device")
    no_dali = pytest.mark.skip(reason="needs nvidia-dali (pip install -e .[dali])")
    has_dali = importlib.util.find_spec("nvidia.dali") is not None
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_gpu)
        if "dali" in item.keywords and not has_dali:
            item.add_marker(no_dali)


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray for the whole test session (2 CPUs, no dashboard), shut down at the end.

    Started by ``precompute.raylocal``, so it dies with the test process even when that is
    killed (a timeout): no Ray process outlives the session.
    """
    ray = pytest.importorskip("ray")
    from precompute.raylocal import start_local_ray

    local = None if ray.is_initialized() else start_local_ray(num_cpus=2)
    yield ray
    if local is not None:
        local.stop()
