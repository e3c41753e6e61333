"""Fixtures of the scale-out tests: a real multi-node Ray cluster on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.objectservers import PROTOCOLS, new_bucket

# A lost node is declared dead after 3 failed health checks a second apart (Ray's defaults: 5,
# 3 s apart, each waiting up to 10 s): a build that lost one goes on within seconds, not up to
# half a minute later, whenever the node's death is learnt by health checks alone.
_DEATH = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}


@pytest.fixture(scope="module")
def ray_cluster(s3_server: str) -> Iterator[Any]:
    """A head and two worker nodes of 1 CPU each (Ray's own multi-node test cluster).

    Its nodes see the test S3 server (``AWS_*`` are set before they start). The test process
    does not connect to it: builds reach it by ``--ray-address``. The
    cluster's address is not written to Ray's machine-wide ``ray_current_cluster`` file, so
    other processes' ``ray.init()`` keep starting their own local Ray.
    """
    import ray._private.utils as ray_utils
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray_utils, "write_ray_address", lambda *args, **kwargs: None)
        # no dashboard, no autoscaler monitor: the tests read the GCS, the cluster's size is fixed
        head = {"num_cpus": 1, "_system_config": _DEATH, "include_dashboard": False}
        head["no_monitor"] = True
        cluster = Cluster(initialize_head=True, head_node_args=head)
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
        except BaseException:
            cluster.shutdown()
            raise
    yield cluster
    cluster.shutdown()


_buckets = iter(range(10**6))


@pytest.fixture
def bucket(s3_server: str) -> str:
    """A new empty bucket on the test server; yields ``s3://<name>``."""
    import boto3

    name = f"nostall-test-{next(_buckets)}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"


@pytest.fixture(params=PROTOCOLS)
def any_bucket(request: pytest.FixtureRequest, s3_server: str, azurite_server: str) -> str:
    """A new bucket on each object server in turn (S3 on moto, Azure Blob on Azurite).

    Both servers are named, so that a session's Ray starts after them and inherits their
    settings (``tests/conftest.py``).
    """
    return new_bucket(request, request.param, "nostall-test")
