"""Fixtures of the object-storage cache tests: a fresh bucket on one server or on each, and the
S3 calls the server answers."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.objectservers import PROTOCOLS, new_bucket
from tests.s3wire import WIRE, WireRequest


@pytest.fixture
def root(s3_server: str) -> str:
    """An ``s3://`` cache root in a new empty bucket of the test server."""
    name = f"nostall-claims-{uuid.uuid4().hex[:12]}"
    import boto3  # the test's own client: buckets are made outside the store's interface

    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}/cache"


@pytest.fixture(params=["local", *PROTOCOLS])
def cache_root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A cache root of each kind in turn: a folder (``flock``), then a new bucket on each object
    server (claims and leases: conditional PUTs)."""
    if request.param == "local":
        return str(tmp_path / "cache")
    return f"{new_bucket(request, request.param, 'nostall-claims')}/cache"


@pytest.fixture(params=PROTOCOLS)
def any_root(request: pytest.FixtureRequest) -> str:
    """A cache root in a new empty bucket of each object server in turn (S3 on moto, Azure
    Blob on Azurite): a scenario that needs no hook on moto's wire runs against both."""
    return f"{new_bucket(request, request.param, 'nostall-claims')}/cache"


@pytest.fixture
def calls(s3_server: str) -> Iterator[Counter[tuple[str, str]]]:
    """Count ``(operation, object key)`` of every S3 call the server answers while it lasts."""
    seen: Counter[tuple[str, str]] = Counter()

    def count(req: WireRequest) -> None:
        seen[req.op, req.key] += 1

    with WIRE.hook(count):
        yield seen
