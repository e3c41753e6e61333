"""The shard writer into a real S3-compatible server (moto), its requests counted."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from precompute.format.layout import StoreLayout
from precompute.format.verify import verify_store
from precompute.pipeline.writer import create_or_resume, finalize, write_shard
from precompute.spec import BuildSpec
from tests.s3wire import WIRE, WireRequest

BUCKET = "nostall-remote-writer"


@pytest.fixture
def gets(s3_server: str) -> Iterator[Counter[str]]:
    """Count the object keys of every GetObject the server answers while it lasts."""
    seen: Counter[str] = Counter()

    def count(req: WireRequest) -> None:
        if req.op == "GetObject":
            seen[req.key] += 1

    with WIRE.hook(count):
        yield seen


def _shard(layout: StoreLayout, shard: int) -> dict[str, Any]:
    start, stop = layout.shard_range(shard)
    n, size = stop - start, layout.size
    return {
        "image": np.full((n, size, size, 3), shard, dtype=np.uint8),
        "label": np.full(n, shard, dtype=np.int64),
        "extent": np.tile(np.array([0, 0, size, size], dtype=np.int32), (n, 1)),
        "key": [f"{i:04d}.jpg" for i in range(start, stop)],
    }


def test_a_writer_reads_each_arrays_metadata_once_not_once_per_shard(
    gets: Counter[str],
) -> None:
    import boto3  # the test's own client: buckets are made outside the store's interface

    boto3.client("s3").create_bucket(Bucket=BUCKET)
    prefix = f"store-{uuid.uuid4().hex[:8]}"  # a store this process has never written
    url = f"s3://{BUCKET}/{prefix}"
    spec = BuildSpec(size=8, shard_samples=4, chunk_samples=2)
    layout = StoreLayout.from_spec(spec, 20)
    assert create_or_resume(url, spec, layout, "fp") == set()
    gets.clear()
    for shard in range(layout.num_shards):  # five shards, as one worker would write them
        write_shard(url, layout, shard, **_shard(layout, shard))
    meta = {k: n for k, n in gets.items() if k.endswith("/zarr.json")}
    assert meta == {f"{prefix}/{name}/zarr.json": 1 for name in layout.arrays}
    finalize(url, {"builder": "test"})
    assert verify_store(url) == []
