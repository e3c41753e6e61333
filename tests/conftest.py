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
    """One local Ray for the whole test session (2 CPUs, no dashboard), shut down at the end."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        # address="local": a new local Ray of our own, never a cluster `ray start` left running here.
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
    yield ray
    if started:
        ray.shutdown()
