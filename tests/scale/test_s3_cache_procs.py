"""Real processes on one ``s3://`` cache: a server process shares it with this one.

Racing builders and a SIGKILLed builder, on this backend and on local disk alike:
``tests/service/test_build_once.py``.
"""

from __future__ import annotations

from pathlib import Path

from service import Cache
from tests.service.helpers import SPEC, make_source, s3_builder
from tests.service.serving import serve_process


def test_serve_with_an_s3_cache_shares_it_with_other_processes(bucket: str, tmp_path: Path) -> None:
    import httpx

    source, root = make_source(tmp_path / "data" / "ds"), f"{bucket}/cache"
    key = Cache(root, builder=s3_builder()).get_or_build(source, SPEC).name  # built here
    args = ["--cache", root, "--source-root", tmp_path / "data"]
    with (
        serve_process(tmp_path / "server.log", *args) as (_, url),
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        hit = c.post("/stores", json={"source": "ds", "spec": SPEC})  # no build: a hit
        assert hit.status_code == 200 and hit.json()["path"] == f"{root}/stores/{key}", hit.text
        assert [s["key"] for s in c.get("/stores").json()["stores"]] == [key]
        assert c.delete(f"/stores/{key}").status_code == 200
    assert Cache(root).list() == []  # removed for every instance
