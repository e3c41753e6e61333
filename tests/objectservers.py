"""The tests' object stores by protocol: a new bucket on the S3 server or the Azure Blob one.

A scenario parametrized over ``"s3"`` (moto, :func:`tests.conftest.s3_server`) and ``"az"``
(Azurite, :func:`tests.azurite.azurite_server`) runs the same steps against both; the bucket or
container is made by each protocol's own request, outside the store interface.
"""

from __future__ import annotations

import uuid

import pytest

from precompute.storage.location import location
from tests.azurite import create_container

__all__ = ["PROTOCOLS", "bucket_and_key", "new_bucket", "objects_under", "urls_under"]

PROTOCOLS = ("s3", "az")  # the URL schemes of the tests' object servers


def new_bucket(request: pytest.FixtureRequest, protocol: str, prefix: str = "nostall") -> str:
    """A new empty bucket (``s3``) or container (``az``) on its test server: its root URL."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    if protocol == "s3":
        import boto3  # the test's own client

        request.getfixturevalue("s3_server")
        boto3.client("s3").create_bucket(Bucket=name)
    elif protocol == "az":
        create_container(request.getfixturevalue("azurite_server"), name)
    else:
        raise ValueError(f"{protocol!r}: not one of {PROTOCOLS}")
    return f"{protocol}://{name}"


def bucket_and_key(url: str) -> tuple[str, str]:
    """The bucket and the key of ``scheme://bucket/key`` (for a test's own client)."""
    where = location(url)
    return where.store.url("").split("://", 1)[1], where.key


def urls_under(url: str) -> list[str]:
    """The URL of every object under ``url``, sorted (one LIST through the store's layer)."""
    where = location(url)
    return sorted(where.store.url(key) for key in where.list())


def objects_under(url: str) -> dict[str, bytes]:
    """Every object under ``url`` by its name relative to it, read through the store's layer."""
    where = location(url)
    base = where.key.rstrip("/")
    return {
        key[len(base) + 1 :] if base else key: bytes(where.store.get(key).data)
        for key in where.list()
    }
