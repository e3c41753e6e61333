"""Start the HTTP API with uvicorn: loopback by default, a token required anywhere else."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from service.errors import ServiceError

if TYPE_CHECKING:
    import uvicorn

__all__ = ["TOKEN_ENV", "check_bind", "is_loopback", "make_server"]

TOKEN_ENV = "NOSTALL_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Return whether ``host`` names a loopback address (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback ``host`` without a token (or with a short one)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ServiceError(f"the token must have at least {MIN_TOKEN_CHARS} characters")
    if not is_loopback(host) and not token:
        raise ServiceError(
            f"refusing to bind {host!r} without a token: anyone who can reach it could build "
            f"and delete stores. Pass --token (or set ${TOKEN_ENV}), or bind 127.0.0.1."
        )


def make_server(
    root: str | Path,
    source_roots: Sequence[str | Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8470,
    token: str | None = None,
    budget_bytes: int | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    log_level: str = "info",
) -> uvicorn.Server:
    """Return a configured ``uvicorn.Server`` (call ``.run()``); checks the bind policy first."""
    check_bind(host, token)
    import uvicorn  # lazy: the cache itself needs no web stack

    from service.cache.builders import precompute_builder
    from service.cache.store import Cache
    from service.http.app import create_app
    from service.http.paths import SourcePolicy

    builder = precompute_builder(ray_address=ray_address, keep_ray=True)
    cache = Cache(root, budget_bytes, builder=builder)
    app = create_app(cache, SourcePolicy(source_roots), token=token, workers=workers)
    logging.getLogger("service").setLevel(log_level.upper())
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)
    return uvicorn.Server(config)
