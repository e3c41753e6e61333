"""The cache service with sources in object storage, over real HTTP and a real S3 server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from precompute.storage.objupload import put_folder
from service import Cache
from service.http.app import create_app
from service.http.paths import SourcePolicy
from tests.servers import wait_ready
from tests.service.helpers import SPEC, index_builder, make_source
from tests.service.server_util import serving


def test_s3_sources_under_an_s3_root_are_built_others_refused(bucket: str, tmp_path: Path) -> None:
    put_folder(make_source(tmp_path / "ds"), f"{bucket}/raw/ds")
    put_folder(make_source(tmp_path / "other"), f"{bucket}/other/ds")
    (tmp_path / "data").mkdir()
    cache = Cache(tmp_path / "cache", builder=index_builder())
    policy = SourcePolicy([tmp_path / "data", f"{bucket}/raw/"])
    with serving(create_app(cache, policy)) as url, httpx.Client(base_url=url, timeout=30) as c:
        r = c.post("/stores", json={"source": f"{bucket}/raw/ds/", "spec": SPEC})
        assert r.status_code == 202, r.text
        doc = wait_ready(c, r.json()["key"])
        assert doc["status"] == "ready" and doc["num_samples"] == 12, doc
        again = c.post("/stores", json={"source": f"{bucket}/raw/ds", "spec": SPEC})
        assert again.status_code == 200 and again.json()["key"] == r.json()["key"]
        for source, why in [
            (f"{bucket}/other/ds", "outside the source roots"),
            (f"{bucket}/raw/../other/ds", "'..' components are not allowed"),
            (f"{bucket}/raw/missing", "no image files in class sub-folders"),
            ("gs://bucket/raw/ds", "outside the source roots"),  # another object store
            ("http://host/raw/ds", "URLs are not served"),
        ]:
            bad = c.post("/stores", json={"source": source, "spec": SPEC})
            assert bad.status_code == 400 and why in bad.json()["error"], (source, bad.text)
    assert cache.get_or_build(f"{bucket}/raw/ds", SPEC) == cache.get(r.json()["key"])


def test_a_missing_local_root_is_named() -> None:
    from service.errors import SourceNotAllowedError

    with pytest.raises(SourceNotAllowedError, match="source root '/no/such/root' does not"):
        SourcePolicy(["/no/such/root"])


def test_an_s3_manifest_may_only_list_files_under_the_roots(bucket: str, tmp_path: Path) -> None:
    from precompute.storage.location import location
    from service.errors import SourceNotAllowedError
    from tests.objectservers import urls_under

    put_folder(make_source(tmp_path / "ds"), f"{bucket}/raw/ds")
    put_folder(make_source(tmp_path / "other"), f"{bucket}/other/ds")
    inside, outside = urls_under(f"{bucket}/raw/ds")[0], urls_under(f"{bucket}/other/ds")[0]
    location(f"{bucket}/raw/good.csv").write_bytes(f"path,label\n{inside},0\n".encode())
    location(f"{bucket}/raw/evil.csv").write_bytes(f"path,label\n{outside},0\n".encode())
    policy = SourcePolicy([f"{bucket}/raw"])
    assert policy.check(f"{bucket}/raw/good.csv") == f"{bucket}/raw/good.csv"
    with pytest.raises(SourceNotAllowedError, match=r"evil\.csv lists .* outside the source roots"):
        policy.check(f"{bucket}/raw/evil.csv")
    with pytest.raises(SourceNotAllowedError, match=r"only sources under \['s3://"):
        policy.check("ds")
