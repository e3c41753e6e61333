"""Command line: ``precompute cache ls|info|rm|gc`` and ``precompute serve``.

Every ``cache`` sub-command prints a human table, or JSON with ``--json``. Keys may be given as
any unique prefix of at least 4 hex digits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from precompute.errors import PrecomputeError
from precompute.format.summary import spec_summary
from service.cache.catalog import Entry
from service.cache.store import Cache
from service.errors import CacheKeyError, ServiceError
from service.http.server import TOKEN_ENV, make_server
from service.http.web.units import ago, human_bytes
from service.resolve import CACHE_ENV, default_cache_root

__all__ = ["cache", "human_bytes", "parse_bytes", "serve"]

_UNITS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}
F = TypeVar("F", bound=Callable[..., Any])


def parse_bytes(text: str) -> int:
    """Parse ``"500M"``, ``"1.5GiB"``, ``"1024"`` into bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?)?b?\s*", text.lower())
    if match is None:
        raise click.BadParameter(f"not a byte size: {text!r} (e.g. 500M, 20GiB, 1048576)")
    return int(float(match.group(1)) * _UNITS[match.group(2) or ""])


def _user_errors(fn: F) -> F:
    """Turn service and precompute errors into one-line CLI errors."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ServiceError, PrecomputeError) as exc:
            raise click.ClickException(str(exc)) from exc

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper  # type: ignore[return-value]


def _full_key(c: Cache, text: str) -> str:
    if len(text) < 4:
        raise CacheKeyError(f"key {text!r} is too short: give >= 4 hex digits")
    matches = [k for k in c.layout.catalog_keys() if k.startswith(text.lower())]
    if len(matches) != 1:
        what = "no store matches" if not matches else f"{len(matches)} stores match"
        raise CacheKeyError(f"{what} key {text!r} in {c.root} (give more hex digits)")
    return matches[0]


def _table(entries: Sequence[Entry]) -> str:
    rows = [("KEY", "SIZE", "SAMPLES", "SPEC", "LAST USED", "SOURCE")]
    for e in entries:
        spec = spec_summary(e.spec)  # each field as its kind describes it
        rows.append(
            (
                e.key[:12],
                human_bytes(e.size_bytes),
                str(e.num_valid),
                spec,
                ago(e.last_access),
                e.source,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _emit(as_json: bool, doc: Any, human: str) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True) if as_json else human)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
root_option = click.option(
    "--root",
    "--cache",
    "root",
    type=str,
    envvar=CACHE_ENV,
    default=None,
    help=f"Cache root: a folder or s3://bucket/prefix (default ${CACHE_ENV} or ~/.cache/nostall).",
)


@click.group(name="cache")
@root_option
@click.pass_context
def cache(ctx: click.Context, root: str | None) -> None:
    """Inspect and maintain the cache of built stores."""
    try:
        ctx.obj = Cache(root if root is not None else default_cache_root())
    except (ServiceError, PrecomputeError) as exc:
        raise click.ClickException(str(exc)) from exc


@cache.command("ls")
@json_option
@click.pass_obj
@_user_errors
def ls_cmd(c: Cache, as_json: bool) -> None:
    """List stores, most recently used first."""
    entries = c.list()
    total = sum(e.size_bytes for e in entries)
    footer = f"\n{len(entries)} stores, {human_bytes(total)}"
    _emit(as_json, [e.to_dict() for e in entries], _table(entries) + footer)


@cache.command("info")
@click.argument("key")
@json_option
@click.pass_obj
@_user_errors
def info_cmd(c: Cache, key: str, as_json: bool) -> None:
    """Show one store (or a running/interrupted build) by key or key prefix."""
    try:
        full = _full_key(c, key)
    except CacheKeyError:
        if len(key) != 64:
            raise
        full = key  # maybe a build in progress, which has no catalog entry yet
    status = c.status(full)
    if status["status"] == "absent":
        raise CacheKeyError(f"no store or build with key {key} in {c.root}")
    human = "\n".join(
        f"{k:>20}: {json.dumps(v) if isinstance(v, dict) else v}" for k, v in status.items()
    )
    _emit(as_json, status, human)


@cache.command("rm")
@click.argument("keys", nargs=-1, required=True)
@json_option
@click.pass_obj
@_user_errors
def rm_cmd(c: Cache, keys: tuple[str, ...], as_json: bool) -> None:
    """Remove stores (refused while a loader holds a lease on one)."""
    removed = [c.remove(_full_key(c, k)) for k in keys]
    human = "\n".join(f"removed {e.key[:12]} ({human_bytes(e.size_bytes)})" for e in removed)
    _emit(as_json, [e.to_dict() for e in removed], human)


@cache.command("gc")
@click.option("--budget", type=str, default=None, help="Byte budget for this run, e.g. 20GiB.")
@json_option
@click.pass_obj
@_user_errors
def gc_cmd(c: Cache, budget: str | None, as_json: bool) -> None:
    """Clean crash debris; evict least-recently-used unleased stores over the budget."""
    report = c.gc(parse_bytes(budget) if budget is not None else None)
    doc = {
        "evicted": list(report.evicted),
        "freed_bytes": report.freed_bytes,
        "skipped_leased": list(report.skipped_leased),
        "cleaned": list(report.cleaned),
        "total_bytes": report.total_bytes,
        "budget_bytes": report.budget_bytes,
    }
    plural = "" if len(report.evicted) == 1 else "s"
    human = (
        f"evicted {len(report.evicted)} store{plural} ({human_bytes(report.freed_bytes)}), "
        f"skipped {len(report.skipped_leased)} leased, cleaned {len(report.cleaned)} "
        f"leftovers; {human_bytes(report.total_bytes)} cached"
    )
    _emit(as_json, doc, human)


@click.command(name="serve")
@root_option
@click.option(
    "--source-root",
    "source_roots",
    multiple=True,
    required=True,
    help="Folder or s3:// prefix requests' sources must lie under (repeatable).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8470, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    default=None,
    help=f"Bearer token required on every request (or ${TOKEN_ENV}).",
)
@click.option("--budget", default=None, help="Byte budget of the cache, e.g. 200GiB.")
@click.option(
    "--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Concurrent builds."
)
@click.option(
    "--ray-address",
    default=None,
    help="Ray for builds (default: RAY_ADDRESS, else a running `ray start` Ray, else a local one).",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
@_user_errors
def serve(
    root: str | None,
    source_roots: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    budget: str | None,
    workers: int,
    ray_address: str | None,
    log_level: str,
) -> None:
    """Serve the cache over HTTP (binds 127.0.0.1 unless given a token)."""
    server = make_server(
        root if root is not None else default_cache_root(),
        source_roots,
        host=host,
        port=port,
        token=token,
        budget_bytes=parse_bytes(budget) if budget else None,
        workers=workers,
        ray_address=ray_address,
        log_level=log_level,
    )
    server.run()
