"""End to end through the real builder: precompute.job.build on a local Ray, via the cache."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import zarr

from precompute.format.layout import open_store_info
from precompute.sources.classes import fingerprint, list_source
from service import Cache, precompute_builder, resolve
from service.http.app import create_app
from service.http.paths import SourcePolicy
from tests.service.helpers import SPEC, make_source
from tests.service.server_util import serving

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_session(ray_local: object) -> None:
    """The session's shared local Ray (tests/conftest.py)."""


def test_get_or_build_runs_the_real_build_once(ray_session: None, tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", num_images=20)
    cache = Cache(tmp_path / "cache", builder=precompute_builder())
    path = cache.get_or_build(source, SPEC)
    info = open_store_info(path)
    assert info.num_valid == 20 and info.spec.size == 16
    assert info.source_fingerprint == fingerprint(list_source(str(source)))
    labels = zarr.open_array(str(path / "label"), mode="r")[:]
    assert sorted(np.bincount(labels).tolist()) == [6, 7, 7]
    assert info.attrs["report"]["builder"] == "precompute.job"
    key = cache.key_for(source, SPEC)
    assert cache.info(key).num_valid == 20
    same, lease = resolve(key, cache=cache)  # the loader's path: key -> (path, lease)
    with lease:
        assert same == path and cache.gc(budget_bytes=0).skipped_leased == (key,)
    assert cache.stats.snapshot()["builds"] == 1
    assert cache.get_or_build(str(source), SPEC) == path
    assert cache.stats.snapshot()["builds"] == 1


def test_http_build_request_runs_on_ray(ray_session: None, tmp_path: Path) -> None:
    make_source(tmp_path / "data" / "ds", num_images=10)
    cache = Cache(tmp_path / "cache", builder=precompute_builder(keep_ray=True))
    with (
        serving(create_app(cache, SourcePolicy([tmp_path / "data"]))) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        r = client.post("/stores", json={"source": "ds", "spec": {**SPEC, "mode": "letterbox"}})
        assert r.status_code == 202
        key = r.json()["key"]
        deadline = time.monotonic() + 120
        while (doc := client.get(f"/stores/{key}").json())["status"] not in ("ready", "failed"):
            assert time.monotonic() < deadline, doc
            time.sleep(0.1)
        assert doc["status"] == "ready", doc
        assert doc["num_valid"] == 10 and doc["spec"]["mode"] == "letterbox"
        assert open_store_info(doc["path"]).attrs["report"]["builder"] == "precompute.job"
