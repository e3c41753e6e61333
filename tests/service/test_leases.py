"""One lease contract for both kinds of cache root: a local folder (a shared ``flock``) and
``s3://`` (a lease object on moto's real S3 server on 127.0.0.1)."""

from __future__ import annotations

import gc
import uuid
from pathlib import Path

import pytest

from service import Cache
from service.cache.builders import Builder
from service.coord.lease import Lease, StoreLease
from service.coord.objlease import ObjectLease
from tests.scale.test_s3_cache import s3_builder
from tests.service.helpers import SPEC, index_builder, make_source


@pytest.fixture(params=["local", "s3"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Cache:
    """A cache on a local folder or in a new bucket of the test S3 server."""
    if request.param == "local":
        return Cache(tmp_path / "cache", builder=index_builder())
    request.getfixturevalue("s3_server")
    name = f"nostall-leases-{uuid.uuid4().hex[:12]}"
    import boto3  # the test's own client: buckets are made outside the store's interface

    boto3.client("s3").create_bucket(Bucket=name)
    builder: Builder = s3_builder()
    return Cache(f"s3://{name}/cache", builder=builder)


def test_every_lease_keeps_its_store_until_released_once(cache: Cache, tmp_path: Path) -> None:
    key = cache.get_or_build(make_source(tmp_path / "src"), SPEC).name
    lease = cache.lease(key)
    assert isinstance(lease, StoreLease)
    assert isinstance(lease, ObjectLease if str(cache.root).startswith("s3://") else Lease)
    assert lease.held and lease.key == key and str(lease.path) == str(cache.get(key))
    assert repr(lease).startswith(f"{type(lease).__name__}(key={key[:12]}...")
    assert repr(lease).endswith(", held)")
    assert cache.gc(budget_bytes=0).skipped_leased == (key,)
    with lease:
        pass
    lease.release()  # idempotent
    assert not lease.held and repr(lease).endswith(", released)")
    assert cache.gc(budget_bytes=0).evicted == (key,)


def test_a_forgotten_lease_is_released_when_collected(cache: Cache, tmp_path: Path) -> None:
    key = cache.get_or_build(make_source(tmp_path / "src"), SPEC).name
    lease = cache.lease(key)
    assert cache.gc(budget_bytes=0).skipped_leased == (key,)
    del lease
    gc.collect()
    assert cache.gc(budget_bytes=0).evicted == (key,)
