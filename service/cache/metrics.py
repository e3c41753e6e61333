"""Counters of a cache and their Prometheus text exposition (format 0.0.4, written by hand).

No ``prometheus_client`` dependency: the format is a few lines of text, and the counters are
per process (a Prometheus server scrapes each process and sums).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

__all__ = ["COUNTERS", "CacheStats", "format_value", "render_prometheus"]

# name -> help text; every counter is exported as nostall_cache_<name>_total.
COUNTERS: dict[str, str] = {
    "hits": "Requests answered by an existing complete store.",
    "misses": "Requests that found no complete store (each then built, joined a build, or failed).",
    "builds": "Stores published (built, or adopted from a crashed builder).",
    "build_failures": "Builds that raised or produced no complete store.",
    "evictions": "Stores evicted by garbage collection (LRU under the byte budget).",
    "removals": "Stores removed on request.",
}


class CacheStats:
    """Thread-safe monotonically increasing counters (see :data:`COUNTERS`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(COUNTERS, 0)

    def inc(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name``."""
        if name not in self._values:
            raise KeyError(f"unknown counter {name!r}; known: {sorted(self._values)}")
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        """Return a copy of the counters."""
        with self._lock:
            return dict(self._values)


def format_value(value: float) -> str:
    """Return a sample value as exposition text: integers exactly, floats round-tripping.

    ``%g`` would print a byte count of 91558123 as ``9.15581e+07``; Prometheus parses any
    Go float syntax, so integers are written in full and other floats with ``repr``.
    """
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _line(name: str, kind: str, help_text: str, value: float) -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n{name} {format_value(value)}\n"


def render_prometheus(counters: Mapping[str, int], gauges: Mapping[str, tuple[float, str]]) -> str:
    """Return the exposition text.

    Args:
        counters: Counter values by name (see :data:`COUNTERS`).
        gauges: ``name -> (value, help)``; exported as ``nostall_cache_<name>``.
    """
    parts = [
        _line(f"nostall_cache_{name}_total", "counter", COUNTERS.get(name, name), value)
        for name, value in counters.items()
    ]
    parts += [
        _line(f"nostall_cache_{name}", "gauge", help_text, value)
        for name, (value, help_text) in gauges.items()
    ]
    return "".join(parts)
