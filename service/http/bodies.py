"""Request bodies of the HTTP API: bounded JSON reading and the ``POST /stores`` document.

Every malformed body is a :class:`~service.errors.ServiceError` (or, for a bad spec, a
:class:`~precompute.errors.SpecError`) whose message names the problem; the app turns both
into a 400. Nothing else escapes for any input (property-tested).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from precompute.spec import BuildSpec
from service.cache.keys import parse_spec
from service.errors import ServiceError

__all__ = ["BUILD_BODY", "MAX_BODY_BYTES", "parse_build_body", "parse_json", "read_json"]

MAX_BODY_BYTES = 64 * 1024
BUILD_BODY = '{"source": "<path>", "spec": {...}}'


def _too_big() -> ServiceError:
    return ServiceError(f"request body must be at most {MAX_BODY_BYTES} bytes of JSON")


def parse_json(body: bytes) -> Any:
    """Return the JSON value of ``body`` (at most :data:`MAX_BODY_BYTES`).

    Raises:
        ServiceError: The body is too big or not JSON.
    """
    if len(body) > MAX_BODY_BYTES:
        raise _too_big()
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ServiceError(f"request body is not valid JSON: {exc}") from exc


async def read_json(request: Request) -> Any:
    """Read and parse a request's JSON body, never buffering more than the limit.

    Raises:
        ServiceError: The body is too big or not JSON.
        starlette.requests.ClientDisconnect: The client went away before sending it all.
    """
    length = request.headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        raise _too_big()
    body = bytearray()
    async for chunk in request.stream():  # bounded even without a Content-Length
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _too_big()
    return parse_json(bytes(body))


def parse_build_body(body: Any) -> tuple[object, BuildSpec]:
    """Return ``(source, spec)`` of a ``POST /stores`` body; both fields are required.

    ``source`` is returned as given (the source policy checks it); ``spec`` is parsed. An empty
    spec ``{}`` asks for every default; a missing one is an error rather than a silent default.

    Raises:
        ServiceError: The body is not an object with exactly ``source`` and ``spec``.
        SpecError: ``spec`` is not a valid build spec.
    """
    if not isinstance(body, dict):
        raise ServiceError(f"body must be a JSON object {BUILD_BODY}, got {type(body).__name__}")
    missing = [name for name in ("source", "spec") if name not in body]
    if missing:
        raise ServiceError(
            f"body lacks {', '.join(map(json.dumps, missing))}: send {BUILD_BODY} "
            '("spec": {} takes every default)'
        )
    unknown = sorted(set(body) - {"source", "spec"})
    if unknown:
        raise ServiceError(f"unknown body field(s) {unknown!r:.200}; send {BUILD_BODY}")
    return body["source"], parse_spec(body["spec"])
