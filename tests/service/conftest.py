"""Fixtures of the ``s3://`` cache tests: a fresh bucket, and the S3 calls the server answers."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.s3wire import WIRE, WireRequest


@pytest.fixture
def root(s3_server: str) -> str:
    """An ``s3://`` cache root in a new empty bucket of the test server."""
    name = f"nostall-claims-{uuid.uuid4().hex[:12]}"
    import boto3  # the test's own client: buckets are made outside the store's interface

    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}/cache"


@pytest.fixture
def calls(s3_server: str) -> Iterator[Counter[tuple[str, str]]]:
    """Count ``(operation, object key)`` of every S3 call the server answers while it lasts."""
    seen: Counter[tuple[str, str]] = Counter()

    def count(req: WireRequest) -> None:
        seen[req.op, req.key] += 1

    with WIRE.hook(count):
        yield seen
