"""The byte-store interface: one contract, run on a local folder, a real S3 server (moto) and a
real Azure Blob server (Azurite).

The object store is obstore talking to moto's server mode on 127.0.0.1 over real HTTP; the
conditional DELETE and the dated GET go out as requests obstore signs (:mod:`.signed`).
"""

from __future__ import annotations

import os
import pickle
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from precompute.errors import StoreError
from precompute.storage import Location, location
from tests.azurite import create_container
from tests.contracts.byte_store import ByteStoreContract
from tests.s3wire import WIRE, Refused, WireRequest


class TestLocalStore(ByteStoreContract):
    @pytest.fixture
    def where(self, tmp_path: Path) -> Location:
        return location(tmp_path / "root")


@pytest.fixture
def bucket(s3_server: str) -> str:
    import boto3  # the test's own client: buckets are made outside the store's interface

    name = f"nostall-storage-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"


class TestObjectStore(ByteStoreContract):
    @pytest.fixture
    def where(self, bucket: str) -> Location:
        return location(f"{bucket}/root")


@pytest.fixture
def container(azurite_server: str) -> str:
    name = f"nostall-storage-{uuid.uuid4().hex[:12]}"
    create_container(azurite_server, name)
    return f"az://{name}"


class TestAzureStore(ByteStoreContract):
    """The same contract on Azure Blob storage (Azurite): another protocol, another client."""

    @pytest.fixture
    def where(self, container: str) -> Location:
        return location(f"{container}/root")


def test_a_local_location_is_a_path_and_an_object_one_is_not(tmp_path: Path, bucket: str) -> None:
    local = location(tmp_path / "s") / "zarr.json"
    assert Path(local) == tmp_path / "s" / "zarr.json" and local.local
    remote = location(f"{bucket}/s") / "zarr.json"
    assert str(remote) == f"{bucket}/s/zarr.json" and not remote.local
    with pytest.raises(TypeError, match=rf"{bucket}/s/zarr.json: an object-store location"):
        os.fspath(remote)  # open(), mkdir() and friends cannot act on a URL by mistake
    for where in (local, remote):
        assert pickle.loads(pickle.dumps(where)) == where  # as Ray hands it to a task


def test_urls_of_no_store_and_without_a_bucket_are_refused_by_name() -> None:
    with pytest.raises(StoreError, match=r"ftp://h/x: must be a local path or an object-store"):
        location("ftp://h/x")
    with pytest.raises(StoreError, match=r"s3:///x: not an s3://bucket/key URL"):
        location("s3:///x")
    assert str(location("file:///tmp/x")) == "/tmp/x"


def test_a_server_that_ignores_if_match_still_never_mixes_versions(bucket: str) -> None:
    obj = location(f"{bucket}/shard")
    old = obj.write_bytes(b"a" * 64)
    obj.write_bytes(b"b" * 64)

    def strip(req: WireRequest) -> None:
        if req.op == "GetObject":
            req.drop_header("If-Match")

    with WIRE.hook(strip), pytest.raises(OSError, match="replaced while the store was read"):
        obj.store.read_into(obj.key, [np.zeros(8, np.uint8)], 0, if_version=old)


def test_object_store_errors_name_the_object_never_the_secret(bucket: str) -> None:
    missing = location(f"{bucket}-none/x")  # a bucket that does not exist
    with pytest.raises(OSError) as info:
        missing.write_bytes(b"x")
    assert f"{bucket}-none/x" in str(info.value)
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(info.value)


def test_a_lock_left_by_a_failing_build_never_hides_the_builds_error(bucket: str) -> None:
    """The server stalls or refuses the lock's DELETE as the build fails: the build's own
    error is raised (the lock's is logged); after a build that succeeded, the lock's is."""
    from precompute.storage.objlock import object_lock

    where = location(f"{bucket}/s")

    def refuse_delete(req: WireRequest) -> None:
        if req.op == "DeleteObject" and req.key.endswith("build.lock"):
            raise Refused(503, "SlowDown")

    lock = f"{where.key}/_nostall/build.lock"
    with (
        WIRE.hook(refuse_delete),
        pytest.raises(ValueError, match="the shard failed"),
        object_lock(where.store, lock, "me"),
    ):
        raise ValueError("the shard failed")
    where.store.delete(lock)
    with (
        WIRE.hook(refuse_delete),
        pytest.raises(OSError, match=r"build\.lock: DELETE failed"),
        object_lock(where.store, lock, "me"),
    ):
        pass


def test_reads_in_place_give_the_same_bytes_by_every_route(bucket: str) -> None:
    """The hot path (a raw socket over http), http.client (https, chunked answers) and
    obstore's GET with a copy (credentials that cannot sign) read the same bytes."""
    from precompute.storage import signed
    from precompute.storage.base import ByteStore

    data = bytes(range(256)) * 100
    obj = location(f"{bucket}/x")
    version = obj.write_bytes(data)
    store: Any = obj.store
    parts = [np.zeros(600, np.uint8), np.zeros(400, np.uint8)]
    assert store.read_into(obj.key, parts, 10, if_version=version) == 1000
    assert b"".join(p.tobytes() for p in parts) == data[10:1010]
    other = np.zeros(1000, np.uint8)
    got = signed._client_read_into(store._store, obj.key, {"Range": "bytes=10-1009"}, [other])
    assert (got.status, got.got, got.size, got.etag) == (206, 1000, len(data), version)
    assert other.tobytes() == data[10:1010]
    third = np.zeros(1000, np.uint8)
    assert ByteStore.read_into(store, obj.key, [third], 10, if_version=version) == 1000
    assert third.tobytes() == data[10:1010]
