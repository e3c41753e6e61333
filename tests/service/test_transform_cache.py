"""A transform through the real cache: an edited one is another key and store, a reverted one
the first store (a hit, no build), a stale fingerprint in a request never the old store."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.format.layout import open_store_info
from service import Cache
from service.cache.builders import BuildRequest
from service.errors import BuildFailedError
from tests.precompute.userpkg import edit, importable_package
from tests.service.helpers import SPEC, make_source


def _in_process(request: BuildRequest) -> None:
    """The cache's build, in this process: a Ray another test of this process initialised
    (the session's) would be joined as it is, and it cannot import a package this test made
    after it started (docs/transforms.md: what a Ray started before the build needs)."""
    from precompute import job

    job.build(str(request.source), str(request.out), request.spec, progress=False,
              runner="sequential")  # fmt: skip


@pytest.fixture()
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    return importable_package(tmp_path, monkeypatch)


def test_an_edited_transform_gets_a_new_store_and_a_reverted_one_the_first(
    tmp_path: Path, pkg: tuple[Path, str]
) -> None:
    root, name = pkg
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=_in_process)
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


def test_the_http_service_takes_a_transform_by_name(tmp_path: Path, pkg: tuple[Path, str]) -> None:
    import httpx

    from service.http.app import create_app
    from service.http.paths import SourcePolicy
    from tests.servers import wait_ready
    from tests.service.server_util import serving

    _, name = pkg
    make_source(tmp_path / "data" / "ds")
    cache = Cache(tmp_path / "cache", builder=_in_process)
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


def test_a_transform_edited_while_its_build_runs_is_said_plainly(
    tmp_path: Path, pkg: tuple[Path, str]
) -> None:
    root, name = pkg
    source = make_source(tmp_path / "src")

    def edited_meanwhile(request: BuildRequest) -> None:
        edit(root, name, "helpers", "\n# edited while the build runs\n")
        _in_process(request)

    cache = Cache(tmp_path / "cache", builder=edited_meanwhile)
    spec = {**SPEC, "transform": f"{name}.ops:invert"}
    asked = cache.request_for(source, spec).spec.transform
    assert asked is not None
    with pytest.raises(BuildFailedError) as err:
        cache.get_or_build(source, spec)
    said = str(err.value)
    assert f"transform {name}.ops:invert: its code changed during the build" in said
    assert f"fingerprint {asked.fingerprint[:12]} when asked" in said and "ask again" in said
    assert "spec hash" not in said
    assert cache.list() == []  # nothing published
