"""Fixtures of the scale-out tests: a real multi-node Ray cluster on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_cluster(s3_server: str) -> Iterator[Any]:
    """A head and two worker nodes of 1 CPU each (Ray's own multi-node test cluster).

    Its nodes see the test S3 server (``AWS_*`` are set before they start). The test process
    does not connect to it: builds reach it by ``--ray-address``. The
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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-compatible server (moto's server mode) on 127.0.0.1, over real HTTP.

    The AWS SDK finds it the usual way: ``AWS_ENDPOINT_URL`` and test credentials in the
    environment (also inherited by Ray workers and subprocesses). Yields the endpoint URL.
    """
    import logging

    server_mod = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "nostall-test-key",
        "AWS_SECRET_ACCESS_KEY": "nostall-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        mp.delenv("AWS_PROFILE", raising=False)
        yield endpoint
    server.stop()


_buckets = iter(range(10**6))


@pytest.fixture
def bucket(s3_server: str) -> str:
    """A new empty bucket on the test server; yields ``s3://<name>``."""
    import boto3

    name = f"nostall-test-{next(_buckets)}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"


def upload_tree(folder: Path, url: str) -> None:
    """PUT every file under ``folder`` as ``url/<relative path>``."""
    from precompute.objstore import put_bytes

    for path in sorted(folder.rglob("*")):
        if path.is_file():
            put_bytes(f"{url}/{path.relative_to(folder).as_posix()}", path.read_bytes())
