"""The cache's HTML status page, rendered on the server from what the JSON API returns.

The page shows nothing the API does not: the stores of ``GET /stores``, the state of each of
its jobs as ``GET /stores/{key}`` gives it (with shard progress while a build runs), and the
counters and gauges of ``GET /metrics``. Every value goes through Jinja2 with autoescaping on,
so a source path or an error message holding markup shows as text.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from precompute.format.summary import spec_summary  # each field as its kind describes it
from service.http.web.units import ago, human_bytes

if TYPE_CHECKING:
    import jinja2

__all__ = ["REFRESH_S", "StatusView", "render_status", "spec_summary"]

REFRESH_S = 5  # the page reloads itself this often while a build is queued or running


@dataclass(frozen=True)
class StatusView:
    """What the status page shows, as the JSON API has it.

    Attributes:
        root: The cache root (a folder, or an ``s3://`` URL).
        stores: ``GET /stores``'s ``stores``: one entry per complete store.
        builds: ``GET /stores/{key}`` of each of ``GET /stores``'s ``jobs`` (queued, building
            with ``progress``, failed with ``job.error``).
        counters: The ``/metrics`` counters of this server (hits, misses, builds, ...).
        gauges: The ``/metrics`` gauges, ``name -> (value, help)`` (bytes, budget_bytes, ...).
        since: Unix time the server started counting.
        now: Unix time of the snapshot.
    """

    root: str
    stores: Sequence[Mapping[str, Any]]
    builds: Sequence[Mapping[str, Any]]
    counters: Mapping[str, int]
    gauges: Mapping[str, tuple[float, str]]
    since: float
    now: float


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _budget(view: StatusView) -> dict[str, Any]:
    used = int(view.gauges["bytes"][0])
    budget = int(view.gauges["budget_bytes"][0]) or None  # 0 in /metrics: unbounded
    share = None if budget is None else used / budget
    return {"used": used, "budget": budget, "share": share}


def _hit_rate(counters: Mapping[str, int]) -> float | None:
    asked = counters.get("hits", 0) + counters.get("misses", 0)
    return counters.get("hits", 0) / asked if asked else None


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # lazy: only the server renders pages

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("service.http.web", "templates"),
        autoescape=True,  # every value escaped, whatever the template's name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        bytes=human_bytes,
        when=_when,
        spec=spec_summary,
        pretty=lambda v: json.dumps(v, indent=1, sort_keys=True),
    )
    return env


def render_status(view: StatusView) -> str:
    """Return the status page of ``view`` as HTML text."""
    busy = any(b.get("status") in ("queued", "building") for b in view.builds)
    return (
        _environment()
        .get_template("status.html")
        .render(
            view=view,
            budget=_budget(view),
            hit_rate=_hit_rate(view.counters),
            refresh=REFRESH_S if busy else None,
            ago=lambda t: ago(t, view.now),
        )
    )
