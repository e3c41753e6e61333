"""The cache serves stores with fields (format v2): segmentation folders and field manifests.

Real sources (``benchmarks.fields_data``), the real build on the session's local Ray, a real
server on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.fields_data import make_landmarks, make_segmentation
from loaders import StoreLoader
from precompute.format.layout import open_store_info
from service import Cache, precompute_builder
from service.errors import SourceNotAllowedError
from service.http.app import create_app
from service.http.paths import SourcePolicy
from tests.servers import wait_ready
from tests.service.server_util import serving

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _mask(ignore: int = 255) -> dict[str, Any]:
    return {"name": "mask", "kind": "mask", "options": {"classes": 4, "ignore_index": ignore}}


def seg_spec(ignore: int = 255) -> dict[str, Any]:
    """A spec naming the fields of a segmentation folder (4 classes)."""
    image = {"name": "image", "kind": "image"}
    return {"size": 24, "shard_samples": 8, "chunk_samples": 4, "fields": [image, _mask(ignore)]}


@pytest.fixture
def ray_session(ray_local: object) -> None:
    """The session's shared local Ray (tests/conftest.py)."""


def test_segmentation_folder_over_http_builds_once_and_keys_field_options(
    ray_session: None, tmp_path: Path
) -> None:
    make_segmentation(tmp_path / "data" / "seg", 10, size=(28, 40))
    cache = Cache(tmp_path / "cache", builder=precompute_builder(keep_ray=True))
    body = {"source": "seg", "spec": seg_spec()}
    with (
        serving(create_app(cache, SourcePolicy([tmp_path / "data"]))) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        bare = client.post("/stores", json={"source": "seg", "spec": {"size": 24}})
        assert bare.status_code == 400 and "classes" in bare.json()["error"]
        r = client.post("/stores", json=body)
        assert r.status_code == 202, r.text
        key = r.json()["key"]
        assert wait_ready(client, key, timeout=240)["status"] == "ready"
        again = client.post("/stores", json=body)
        assert again.status_code == 200 and again.json()["key"] == key
        other = client.post("/stores", json={"source": "seg", "spec": seg_spec(ignore=100)})
        assert other.status_code == 202 and other.json()["key"] != key
        assert wait_ready(client, other.json()["key"], timeout=240)["status"] == "ready"
    assert cache.stats.snapshot()["builds"] == 2  # one per key, the repeat request was a hit
    info = open_store_info(cache.info(key).path)
    assert [f.name for f in info.spec.fields] == ["image", "mask"] and info.num_valid == 10


def test_store_loader_builds_a_landmark_manifest_through_the_cache(
    ray_session: None, tmp_path: Path
) -> None:
    manifest = make_landmarks(tmp_path / "lm", 8, size=40, points=5)
    cache = Cache(tmp_path / "cache", builder=precompute_builder())
    spec = {"size": 32, "mode": "letterbox", "shard_samples": 4, "chunk_samples": 4}
    with StoreLoader((str(manifest), spec), cache=cache, batch_size=4, augment=None) as loader:
        batch = next(iter(loader))
    assert set(batch) >= {"image", "keypoints"} and tuple(batch["keypoints"].shape) == (4, 5, 3)
    key = cache.key_for(manifest, spec)  # the inferred fields are in the key
    assert cache.get(key) is not None and cache.stats.snapshot()["builds"] == 1
    assert np.isfinite(batch["keypoints"].numpy()).all()


def test_the_source_policy_checks_every_file_column_of_a_field_manifest(tmp_path: Path) -> None:
    seg = make_segmentation(tmp_path / "data" / "seg", 1, size=32)
    outside = make_segmentation(tmp_path / "outside", 1, size=32)
    data = tmp_path / "data"
    (data / "ok.csv").write_text("image,mask\nseg/images/case_00000.png,seg/masks/case_00000.png\n")
    assert SourcePolicy([data]).check("ok.csv") == data / "ok.csv" and seg.is_dir()
    escape = f"image,mask\nseg/images/case_00000.png,{outside / 'masks' / 'case_00000.png'}\n"
    (data / "evil.csv").write_text(escape)
    with pytest.raises(SourceNotAllowedError, match=r"lists .*case_00000.png.*outside the source"):
        SourcePolicy([data]).check("evil.csv")
