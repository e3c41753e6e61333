"""Fixtures of the ``s3://`` cache tests: a fresh bucket, and the S3 calls this process makes."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from precompute.storage import objstore


@pytest.fixture
def root(s3_server: str) -> str:
    """An ``s3://`` cache root in a new empty bucket of the test server."""
    name = f"nostall-claims-{uuid.uuid4().hex[:12]}"
    objstore.client().create_bucket(Bucket=name)
    return f"s3://{name}/cache"


@pytest.fixture
def calls(s3_server: str) -> Iterator[Counter[tuple[str, str]]]:
    """Count ``(operation, object key)`` of every S3 call this process makes while it lasts."""
    seen: Counter[tuple[str, str]] = Counter()

    def count(model: Any, params: dict[str, Any], **_: Any) -> None:
        seen[model.name, str(params.get("Key", ""))] += 1

    events = objstore.client().meta.events
    events.register("before-parameter-build.s3", count, unique_id="nostall-test-calls")
    yield seen
    events.unregister("before-parameter-build.s3", unique_id="nostall-test-calls")
