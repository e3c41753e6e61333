"""What every source lister shares: the URL test and the per-input policy."""

from __future__ import annotations

from precompute.errors import SourceError

__all__ = ["is_url", "per_input"]


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL other than ``file://`` (read through fsspec, never stat-ed)."""
    return "://" in path and not path.startswith("file://")


def per_input(src: str, on_error: str, skipped: list[tuple[str, str]], key: str, why: str) -> None:
    """Apply ``on_error`` to one unusable input found while listing ``src``.

    Raises:
        SourceError: Under ``on_error: raise``, naming ``src``, ``key`` and ``why``; under
            ``skip`` the ``(key, why)`` pair is recorded in ``skipped`` instead.
    """
    if on_error == "raise":
        raise SourceError(f"{src}: {key}: {why}")
    skipped.append((key, why))
