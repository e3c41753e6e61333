"""One lease contract for every kind of cache root: a local folder (a shared ``flock``) and
object storage (a lease object on moto's S3 and on Azurite, on 127.0.0.1)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from precompute.storage.location import is_url
from service import Cache
from service.coord.lease import Lease, StoreLease
from service.coord.objlease import ObjectLease
from tests.service.helpers import SPEC, make_source
from tests.service.worker import builder_for


@pytest.fixture
def cache(cache_root: str) -> Cache:
    """A cache on a local folder, then in a new bucket of each object server."""
    return Cache(cache_root, builder=builder_for(cache_root))


def test_every_lease_keeps_its_store_until_released_once(cache: Cache, tmp_path: Path) -> None:
    key = cache.get_or_build(make_source(tmp_path / "src"), SPEC).name
    lease = cache.lease(key)
    assert isinstance(lease, StoreLease)
    assert isinstance(lease, ObjectLease if is_url(cache.root) else Lease)
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
