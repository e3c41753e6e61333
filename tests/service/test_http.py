"""The HTTP API over real loopback sockets: builds, listing, deletion, auth, bad input."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from service import BuildRequest, Cache
from service.http.app import create_app
from service.http.paths import SourcePolicy
from tests.servers import wait_ready
from tests.service.helpers import SPEC, first_shard, index_builder, make_source, read_log
from tests.service.server_util import serving

TOKEN = "s3cret-token-0123456789"


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("http")
    data = base / "data"
    make_source(data / "ds")
    outside = make_source(base / "outside")
    (data / "escape").symlink_to(outside, target_is_directory=True)
    (data / "evil.csv").write_text(f"path,label\n{next(outside.rglob('*.png'))},0\n")
    (data / "dotdot.csv").write_text("path,label\n../outside/c0/0000.png,0\n")
    return {"base": base, "data": data, "outside": outside}


@pytest.fixture(scope="module")
def server(roots: dict[str, Path]) -> Iterator[tuple[str, Cache]]:
    cache = Cache(roots["base"] / "cache", builder=index_builder(roots["base"] / "log"))
    app = create_app(cache, SourcePolicy([roots["data"]]), workers=2)
    with serving(app) as url:
        yield url, cache


def test_build_list_get_delete_and_metrics(
    server: tuple[str, Cache], roots: dict[str, Path]
) -> None:
    url, cache = server
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        r = client.post("/stores", json={"source": "ds", "spec": SPEC})
        assert r.status_code == 202, r.text
        key = r.json()["key"]
        assert r.headers["location"] == f"/stores/{key}" and r.json()["status"] in (
            "queued",
            "building",
        )
        doc = wait_ready(client, key)
        assert doc["status"] == "ready" and doc["spec"]["size"] == 16
        assert doc["size_bytes"] > 0 and doc["num_samples"] == 12
        again = client.post("/stores", json={"spec": SPEC, "source": str(roots["data"] / "ds")})
        assert again.status_code == 200 and again.json()["key"] == key
        assert [s["key"] for s in client.get("/stores").json()["stores"]] == [key]
        metrics = client.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        lines = dict(ln.rsplit(" ", 1) for ln in metrics.text.splitlines() if ln[0] != "#")
        assert lines["nostall_cache_builds_total"] == "1"
        assert int(lines["nostall_cache_hits_total"]) >= 1
        assert int(lines["nostall_cache_bytes"]) == doc["size_bytes"]
        assert {"nostall_cache_evictions_total", "nostall_cache_misses_total"} <= set(lines)
        with cache.open(key):
            assert client.delete(f"/stores/{key}").status_code == 409
        assert client.delete(f"/stores/{key}").json()["removed"]["key"] == key
        assert client.get(f"/stores/{key}").status_code == 404
        assert client.delete(f"/stores/{key}").status_code == 404
    assert len(read_log(roots["base"] / "log")) == 1


@pytest.mark.parametrize("wrote", [False, True], ids=["before-writing", "after-a-shard"])
def test_failed_build_is_reported_not_fatal(roots: dict[str, Path], wrote: bool) -> None:
    """Failed, whether or not the build wrote shards first (its folder then stays, with its
    progress, and says ``failed``, not ``interrupted``: a client waits for ready or failed)."""

    def explode(request: BuildRequest) -> None:
        if wrote:
            first_shard(request)
        raise RuntimeError("disk on fire")

    cache = Cache(roots["base"] / f"cache-fail-{wrote}", builder=explode)
    with (
        serving(create_app(cache, SourcePolicy([roots["data"]]))) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        key = client.post("/stores", json={"source": "ds", "spec": SPEC}).json()["key"]
        doc = wait_ready(client, key)
        assert doc["status"] == "failed" and "disk on fire" in doc["job"]["error"]
        assert ("progress" in doc) == wrote  # how far it got: the next request resumes there
        listed = client.get("/stores").json()["jobs"]
        assert [(j["key"], j["status"]) for j in listed] == [(key, "failed")]
        assert client.get("/healthz").status_code == 200


BAD_REQUESTS = [
    ({"source": "../outside", "spec": SPEC}, "'..'"),
    ({"source": "ds/../../outside", "spec": SPEC}, "'..'"),
    ({"source": "/etc", "spec": SPEC}, "outside the source roots"),
    ({"source": "escape", "spec": SPEC}, "outside the source roots"),
    ({"source": "evil.csv", "spec": SPEC}, "outside the source roots"),
    ({"source": "dotdot.csv", "spec": SPEC}, "outside the source roots"),
    ({"source": "missing", "spec": SPEC}, "does not exist"),
    ({"source": "s3://bucket/x", "spec": SPEC}, "URL"),
    ({"source": 7, "spec": SPEC}, "path string"),
    ({"source": "ds", "spec": {"size": -1}}, "size"),
    ({"source": "ds", "spec": {"bogus": 1}}, "bogus"),
    ({"source": "ds", "spec": {"variants": 2, "augment": [1, 2]}}, "spec"),
    ({"source": "ds", "spec": {"size": 16, "shard_samples": 10, "chunk_samples": 4}}, "multiple"),
    ({"source": "ds", "spec": "big"}, "mapping"),
    ({"spec": SPEC}, 'body lacks "source"'),
    ({"source": "ds"}, 'body lacks "spec"'),  # was a silent 224 px build
    ({}, 'body lacks "source", "spec"'),
    ({"source": "ds", "spec": SPEC, "extra": 1}, "unknown body field(s) ['extra']"),
    ([1, 2], "body must be a JSON object"),
]


@pytest.mark.parametrize(("body", "message"), BAD_REQUESTS)
def test_bad_requests_get_400_naming_the_problem(
    server: tuple[str, Cache], body: object, message: str
) -> None:
    r = httpx.post(f"{server[0]}/stores", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]


def test_metrics_print_integers_exactly(roots: dict[str, Path]) -> None:
    budget = 91_558_123  # %g printed 9.15581e+07
    cache = Cache(roots["base"] / "cache-metrics", budget, builder=index_builder())
    with serving(create_app(cache, SourcePolicy([roots["data"]]))) as url:
        text = httpx.get(f"{url}/metrics", timeout=30).text
    lines = dict(ln.rsplit(" ", 1) for ln in text.splitlines() if ln[0] != "#")
    assert lines["nostall_cache_budget_bytes"] == str(budget)
    assert all(value.isdigit() for value in lines.values()), text


def test_malformed_bodies_and_keys(server: tuple[str, Cache]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/stores", content=b"{not json").status_code == 400
        assert client.post("/stores", content=b"[" * 60_000).status_code == 400
        assert client.post("/stores", content=b"x" * (65 * 1024)).status_code == 400
        assert client.get("/stores/..%2F..%2Fetc").status_code in (400, 404)
        assert client.get("/stores/nothex").status_code == 400
        assert client.delete("/stores/ABC").status_code == 400
        assert client.get(f"/stores/{'0' * 64}").status_code == 404


def test_burst_of_bad_requests_leaves_the_server_answering(server: tuple[str, Cache]) -> None:
    url, _ = server
    bodies = [
        b"{",
        b"null",
        b'{"source": "../x"}',
        b'{"source": "ds", "spec": {"size": "a"}}',
        b'{"source": "/etc", "spec": {}}',
        b"\xff\xfe",
        b'{"source": "ds", "spec": []}',
    ]

    def bad(i: int) -> int:  # eight at a time over one client's pool of connections
        if i % 9 == 0:
            return client.get(f"/stores/{'z' * (1 + i % 70)}").status_code
        return client.post("/stores", content=bodies[i % len(bodies)]).status_code

    with httpx.Client(base_url=url, timeout=30) as client, ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(bad, range(200)))
    assert all(400 <= c < 500 for c in codes), sorted(set(codes))
    assert httpx.get(f"{url}/healthz", timeout=30).json() == {"status": "ok"}


def test_token_is_required_when_configured(roots: dict[str, Path]) -> None:
    cache = Cache(roots["base"] / "cache-auth", builder=index_builder())
    app = create_app(cache, SourcePolicy([roots["data"]]), token=TOKEN)
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 401
        assert (
            httpx.get(f"{url}/stores", headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        no_auth = httpx.post(f"{url}/stores", json={"source": "ds", "spec": SPEC})
        assert no_auth.status_code == 401 and no_auth.headers["www-authenticate"] == "Bearer"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{url}/stores", headers=auth).json() == {"stores": [], "jobs": []}
        assert httpx.get(f"{url}/healthz", headers=auth).status_code == 200
        assert httpx.get(f"{url}/").status_code == 401  # the status page too
        page = httpx.get(f"{url}/", headers=auth)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_build_queue_is_bounded(roots: dict[str, Path]) -> None:
    gate = threading.Event()

    def gated(request: BuildRequest) -> None:
        gate.wait(60)
        index_builder()(request)

    cache = Cache(roots["base"] / "cache-queue", builder=gated)
    app = create_app(cache, SourcePolicy([roots["data"]]), max_pending=1)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        first = client.post("/stores", json={"source": "ds", "spec": SPEC})
        assert first.status_code == 202
        same = client.post("/stores", json={"source": "ds", "spec": SPEC})
        assert same.status_code == 202 and same.json()["key"] == first.json()["key"]
        other = client.post("/stores", json={"source": "ds", "spec": {**SPEC, "seed": 9}})
        assert other.status_code == 429 and "retry later" in other.json()["error"]
        pending = client.get(f"/stores/{first.json()['key']}").json()
        assert pending["status"] in ("queued", "building") and pending["job"]["error"] is None
        assert [j["key"] for j in client.get("/stores").json()["jobs"]] == [first.json()["key"]]
        refused = client.delete(f"/stores/{first.json()['key']}")  # known: building, not absent
        assert refused.status_code == 409 and "remove it once built" in refused.json()["error"]
        gate.set()
        assert wait_ready(client, first.json()["key"])["status"] == "ready"
        assert (
            client.post("/stores", json={"source": "ds", "spec": {**SPEC, "seed": 9}}).status_code
            == 202
        )


class _ReadThenFinish(Cache):
    """A cache whose first ``status`` or ``list`` once :attr:`armed` lets every build (held by
    :meth:`builder` until then) run to the end before it returns what it read: a poller reads
    the cache, then the jobs, finished in between. One per test (its own events)."""

    def __init__(self, root: Path, builds: int) -> None:
        super().__init__(root, builder=self.builder)
        self.armed, self.go, self.builds = threading.Event(), threading.Event(), builds

    def builder(self, request: BuildRequest) -> None:
        assert self.go.wait(60)
        index_builder()(request)

    def _hold(self) -> None:
        if self.armed.is_set() and not self.go.is_set():
            self.go.set()  # the builds run only now, and end before the jobs are read
            deadline = time.monotonic() + 60
            while len(super().list()) < self.builds:
                assert time.monotonic() < deadline, "the builds never finished"
                time.sleep(0.01)
            time.sleep(0.2)  # and their jobs are marked ready

    def status(self, key: str) -> dict[str, Any]:
        state = super().status(key)
        self._hold()
        return state

    def list(self) -> Any:
        entries = super().list()
        self._hold()
        return entries


@contextmanager
def _racing(cache: Cache, data: Path) -> Iterator[httpx.Client]:
    with (
        serving(create_app(cache, SourcePolicy([data]), workers=1)) as url,
        httpx.Client(base_url=url, timeout=90) as client,
    ):
        yield client


def test_a_build_that_finishes_while_its_state_is_read_is_never_absent(
    roots: dict[str, Path],
) -> None:
    cache = _ReadThenFinish(roots["base"] / "cache-race", builds=2)
    with _racing(cache, roots["data"]) as client:
        client.post("/stores", json={"source": "ds", "spec": SPEC})  # holds the one worker
        queued = client.post("/stores", json={"source": "ds", "spec": {**SPEC, "seed": 9}})
        key = queued.json()["key"]  # queued behind it: no claim, the cache knows nothing yet
        cache.armed.set()
        got = client.get(f"/stores/{key}")  # read absent in the cache, its job ready since
        assert got.status_code == 200, got.text
        assert got.json()["status"] in ("queued", "building", "ready")
        assert wait_ready(client, key)["status"] == "ready"


def test_a_build_that_finishes_while_the_list_is_read_is_listed(roots: dict[str, Path]) -> None:
    cache = _ReadThenFinish(roots["base"] / "cache-list-race", builds=2)
    with _racing(cache, roots["data"]) as client:
        keys = [
            client.post("/stores", json={"source": "ds", "spec": {**SPEC, "seed": s}}).json()["key"]
            for s in (1, 2)
        ]
        cache.armed.set()
        doc = client.get("/stores").json()  # the cache read before the builds ended
        listed = {s["key"] for s in doc["stores"]} | {j["key"] for j in doc["jobs"]}
        assert listed == set(keys), doc
