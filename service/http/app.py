"""The HTTP API of the cache (FastAPI).

Routes: ``GET /`` (the HTML status page, :mod:`service.http.web`), ``GET /healthz``,
``GET /metrics`` (Prometheus text), ``GET /stores``,
``GET /stores/{key}``, ``POST /stores`` (``{"source": ..., "spec": {...}}``, both required ->
202 queued, or 200 when already built), ``DELETE /stores/{key}``. With a token, every request
needs ``Authorization: Bearer <token>`` (401 otherwise). User errors are 4xx with
``{"error": message}``; an unexpected error is a 500 for that request only; a client that
disconnects before sending its body costs one log line.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from precompute.errors import PrecomputeError
from service.cache.keys import is_key
from service.cache.metrics import render_prometheus
from service.cache.store import Cache
from service.errors import HTTP_STATUS, ServiceError
from service.http.bodies import MAX_BODY_BYTES, parse_build_body, read_json
from service.http.jobs import BuildQueue
from service.http.paths import SourcePolicy
from service.http.web import StatusView, render_status

__all__ = ["MAX_BODY_BYTES", "create_app"]

log = logging.getLogger("service.http.app")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _bad_key(key: str) -> JSONResponse | None:
    return None if is_key(key) else _error(400, f"not a cache key (64 lowercase hex): {key!r:.80}")


def _stores_doc(cache: Cache, queue: BuildQueue) -> dict[str, Any]:
    """``GET /stores``: every complete store, and the jobs not (yet) ready.

    The jobs are read before the cache, as in :func:`_store_doc`: a build that finishes in
    between is then listed as a store, not left out of both lists.
    """
    jobs = queue.jobs()
    stores = [{"status": "ready", **e.to_dict()} for e in cache.list()]
    ready = {s["key"] for s in stores}
    pending = [j.to_dict() for j in jobs if j.key not in ready and j.status != "ready"]
    return {"stores": stores, "jobs": pending}


def _store_doc(cache: Cache, queue: BuildQueue, key: str) -> dict[str, Any]:
    """``GET /stores/{key}``: the state of ``key`` (``absent`` when nobody knows it).

    A job of this server that is not ready says the status where the cache knows no live
    build: ``queued``, ``building`` or ``failed`` (a failed build's shards stay, ``progress``
    says how far it got, and the next request resumes it).

    The job is read before the cache: a job is marked ready only once its store is in the
    cache, so a job that finishes between the two reads is then seen ready in the cache. Read
    the other way round, a queued build that finished in between was ``absent`` (a 404).
    """
    job = queue.get(key)
    state = cache.status(key)
    if job is not None and job.status != "ready" and state["status"] != "ready":
        state["job"] = job.to_dict()
        # This server's job is newer news than a folder no live build holds: a build that
        # failed after writing shards is "failed" (with its progress), not "interrupted"; a
        # build queued again over one that died is "queued". A live claim stays "building".
        if state["status"] in ("absent", "interrupted"):
            state["status"] = job.status
    return state


def _gauges(cache: Cache, queue: BuildQueue, stores: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``/metrics`` gauges, ``name -> (value, help)``, of the stores ``_stores_doc`` lists."""
    counts = queue.counts()
    return {
        "bytes": (sum(s["size_bytes"] for s in stores), "Bytes of cached stores."),
        "stores": (len(stores), "Complete stores in the cache."),
        "budget_bytes": (cache.budget_bytes or 0, "Byte budget (0: unbounded)."),
        "builds_queued": (counts["queued"], "Requested builds waiting."),
        "builds_running": (counts["building"], "Builds running now."),
    }


def _install_error_handlers(app: FastAPI) -> None:
    async def service_error(request: Request, exc: Exception) -> Response:
        status = next((HTTP_STATUS[c] for c in type(exc).__mro__ if c in HTTP_STATUS), 400)
        return _error(status, str(exc))

    async def precompute_error(request: Request, exc: Exception) -> Response:
        return _error(400, str(exc))

    async def disconnected(request: Request, exc: Exception) -> Response:
        log.warning(
            "client disconnected before sending its request body: %s %s",
            request.method,
            request.url.path,
        )
        return Response(status_code=400)  # nobody reads it

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}")

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(PrecomputeError, precompute_error)
    app.add_exception_handler(ClientDisconnect, disconnected)
    app.add_exception_handler(Exception, unexpected)


def _install_auth(app: FastAPI, token: str | None) -> None:
    if token is None:
        return
    expected = f"Bearer {token}".encode()

    @app.middleware("http")
    async def require_token(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return JSONResponse(
                {"error": "missing or wrong bearer token"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)


def create_app(
    cache: Cache,
    policy: SourcePolicy,
    *,
    token: str | None = None,
    workers: int = 1,
    max_pending: int = 64,
) -> FastAPI:
    """Return the API app over ``cache``; builds run in a :class:`BuildQueue`."""
    queue = BuildQueue(cache, workers, max_pending)
    app = FastAPI(title="nostall cache", version="1", on_shutdown=[queue.shutdown])
    app.state.cache, app.state.queue, app.state.policy = cache, queue, policy
    started = time.time()  # the counters on the status page count from here
    _install_error_handlers(app)
    _install_auth(app, token)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", response_class=HTMLResponse)
    def status_page() -> HTMLResponse:
        doc = _stores_doc(cache, queue)
        view = StatusView(
            root=str(cache.root),
            stores=doc["stores"],
            builds=[_store_doc(cache, queue, job["key"]) for job in doc["jobs"]],
            counters=cache.stats.snapshot(),
            gauges=_gauges(cache, queue, doc["stores"]),
            since=started,
            now=time.time(),
        )
        return HTMLResponse(render_status(view))

    @app.get("/metrics")
    def metrics() -> Response:
        gauges = _gauges(cache, queue, _stores_doc(cache, queue)["stores"])
        text = render_prometheus(cache.stats.snapshot(), gauges)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/stores")
    def list_stores() -> dict[str, Any]:
        return _stores_doc(cache, queue)

    @app.get("/stores/{key}", response_model=None)
    def get_store(key: str) -> dict[str, Any] | JSONResponse:
        if (bad := _bad_key(key)) is not None:
            return bad
        state = _store_doc(cache, queue, key)
        if state["status"] == "absent":
            return _error(404, f"no store or build with key {key}")
        return state

    @app.post("/stores", status_code=202, response_model=None)
    async def request_build(request: Request) -> JSONResponse:
        source, spec = parse_build_body(await read_json(request))  # SpecError -> 400
        return await run_in_threadpool(_submit, source, spec)

    def _submit(source: object, spec: Any) -> JSONResponse:
        path = policy.check(source)
        build_request = cache.request_for(path, spec)
        hit = cache.get(build_request.key)
        if hit is not None:
            return JSONResponse(cache.status(build_request.key), status_code=200)
        job = queue.submit(build_request)
        return JSONResponse(
            job.to_dict(), status_code=202, headers={"Location": f"/stores/{job.key}"}
        )

    @app.delete("/stores/{key}", response_model=None)
    def delete_store(key: str) -> dict[str, Any] | JSONResponse:
        if (bad := _bad_key(key)) is not None:
            return bad
        job = queue.get(key)
        if job is not None and job.status in ("queued", "building"):  # known, not absent
            return _error(409, f"the store with key {key} is {job.status}: remove it once built")
        return {"removed": cache.remove(key).to_dict()}

    return app
