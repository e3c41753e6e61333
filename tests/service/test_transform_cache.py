"""A transform through the real cache: an edited one is another key and store, a reverted one
the first store (a hit, no build), a stale fingerprint in a request never the old store."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.format.layout import open_store_info
from service import Cache, precompute_builder
from tests.precompute.userpkg import edit, make_package
from tests.service.helpers import SPEC, make_source


def test_an_edited_transform_gets_a_new_store_and_a_reverted_one_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "code"
    name = make_package(root)
    monkeypatch.syspath_prepend(str(root))
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=precompute_builder())
    spec = {**SPEC, "transform": {"name": f"{name}.ops:invert", "args": {"top": 200}}}
    first = cache.get_or_build(source, spec)
    key = cache.key_for(source, spec)
    stored = open_store_info(first).spec.to_dict()["transform"]
    helpers = (root / name / "helpers.py").read_text()
    edit(root, name, "helpers", "\n# edited\n")
    second = cache.get_or_build(source, spec)
    assert second != first and cache.key_for(source, spec) != key
    stale = {**SPEC, "transform": stored}  # the first store's own spec, its old fingerprint
    assert cache.get_or_build(source, stale) == second  # the code as it is now
    (root / name / "helpers.py").write_text(helpers)
    builds = cache.stats.snapshot()["builds"]
    assert cache.get_or_build(source, spec) == first  # reverted: the first store, a hit
    assert cache.key_for(source, spec) == key
    assert cache.stats.snapshot()["builds"] == builds == 2


def test_the_http_service_takes_a_transform_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from service.http.app import create_app
    from service.http.paths import SourcePolicy
    from tests.servers import wait_ready
    from tests.service.server_util import serving

    root = tmp_path / "code"
    name = make_package(root)
    monkeypatch.syspath_prepend(str(root))
    make_source(tmp_path / "data" / "ds")
    cache = Cache(tmp_path / "cache", builder=precompute_builder())
    spec = {**SPEC, "transform": f"{name}.ops:invert"}
    with (
        serving(create_app(cache, SourcePolicy([tmp_path / "data"]))) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        r = client.post("/stores", json={"source": "ds", "spec": spec})
        assert r.status_code == 202, r.text
        doc = wait_ready(client, r.json()["key"])
        assert doc["status"] == "ready" and doc["spec"]["transform"]["name"] == f"{name}.ops:invert"
        bad = {**SPEC, "transform": "nowhere_to_be_found.ops:fn"}
        r = client.post("/stores", json={"source": "ds", "spec": bad})
        assert r.status_code == 400 and "cannot import nowhere_to_be_found.ops" in r.text
