"""A store with fields built into each real object server (S3 on moto, Azure Blob on Azurite):
the bytes of a local build."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.fields import FieldSpec
from precompute.format.verify import verify_store
from precompute.job import build
from precompute.spec import BuildSpec
from precompute.storage import location
from tests.objectservers import PROTOCOLS, new_bucket
from tests.precompute.fielddata import make_segmentation

pytestmark = [pytest.mark.ray]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_segmentation_store_round_trips_through_object_storage(
    s3_server: str,
    azurite_server: str,
    ray_local: None,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    protocol: str,
) -> None:
    src = make_segmentation(tmp_path / "seg", 10)
    fields = (FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4}))
    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2, fields=fields)
    url = f"{new_bucket(request, protocol, 'nostall-fields')}/store"
    attrs = build(str(src), url, spec, progress=False)
    local = build(str(src), str(tmp_path / "local"), spec, progress=False)
    assert attrs["version"] == 2 and attrs["fields"] == local["fields"]
    names = ("image", "mask", "extent", "valid", "key")
    where = location(url)
    remote = {
        name: bytes(where.store.get(key).data)
        for key in where.list()
        if (name := where.store.url(key)[len(url) + 1 :]).split("/", 1)[0] in names
    }
    on_disk = {
        p.relative_to(tmp_path / "local").as_posix(): p.read_bytes()
        for name in names
        for p in sorted((tmp_path / "local" / name).rglob("*"))
        if p.is_file()
    }
    assert remote == on_disk
    assert verify_store(url) == []
