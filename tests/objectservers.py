"""The tests' object stores by protocol: a new bucket on the S3 server or the Azure Blob one.

A scenario parametrized over ``"s3"`` (moto, :func:`tests.conftest.s3_server`) and ``"az"``
(Azurite, :func:`tests.azurite.azurite_server`) runs the same steps against both; the bucket or
container is made by each protocol's own request, outside the store interface.
"""

from __future__ import annotations

import uuid

import pytest

from tests.azurite import create_container

__all__ = ["PROTOCOLS", "new_bucket"]

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
