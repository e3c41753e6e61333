"""Fixtures of the scale-out tests: a real multi-node Ray cluster on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A head and two worker nodes of 1 CPU each (Ray's own multi-node test cluster).

    The test process does not connect to it: builds reach it by ``--ray-address``. The
    cluster's address is not written to Ray's machine-wide ``ray_current_cluster`` file, so
    other processes' ``ray.init()`` keep starting their own local Ray.
    """
    ray_utils = pytest.importorskip("ray._private.utils")
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray_utils, "write_ray_address", lambda *args, **kwargs: None)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
        except BaseException:
            cluster.shutdown()
            raise
    yield cluster
    cluster.shutdown()
