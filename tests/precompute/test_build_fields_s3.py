"""A store with fields built into a real S3-compatible server (moto): the bytes of a local build."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.fields import FieldSpec
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.spec import BuildSpec
from precompute.storage import objstore
from tests.precompute.fielddata import make_segmentation

pytestmark = [pytest.mark.ray]


def test_a_segmentation_store_round_trips_through_s3(
    s3_server: str, ray_local: None, tmp_path: Path
) -> None:
    import boto3

    boto3.client("s3").create_bucket(Bucket="nostall-fields")
    src = make_segmentation(tmp_path / "seg", 10)
    fields = (FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4}))
    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2, fields=fields)
    url = "s3://nostall-fields/store"
    attrs = build(str(src), url, spec, progress=False)
    local = build(str(src), str(tmp_path / "local"), spec, progress=False)
    assert attrs["version"] == 2 and attrs["fields"] == local["fields"]
    names = ("image", "mask", "extent", "valid", "key")
    remote = {
        obj[len(url) + 1 :]: objstore.get_range(obj).data
        for obj in objstore.list_sizes(url)
        if obj[len(url) + 1 :].split("/", 1)[0] in names
    }
    on_disk = {
        p.relative_to(tmp_path / "local").as_posix(): p.read_bytes()
        for name in names
        for p in sorted((tmp_path / "local" / name).rglob("*"))
        if p.is_file()
    }
    assert remote == on_disk
    assert verify_store(url) == []
