"""Numbers as people read them: byte sizes and ages (the CLI's tables and the status page)."""

from __future__ import annotations

import time

__all__ = ["ago", "human_bytes"]


def human_bytes(n: float) -> str:
    """Return ``n`` bytes as a short human string (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def ago(t: float, now: float | None = None) -> str:
    """Return how long before ``now`` (default: the time now) Unix time ``t`` was: ``3m ago``."""
    s = max(0.0, (time.time() if now is None else now) - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"
