"""The benchmark's view of the raw dataset: local file paths and labels, via precompute."""

from __future__ import annotations

from pathlib import Path

from benchmarks.errors import BenchConfigError

__all__ = ["list_items", "num_classes"]


def list_items(data: str) -> tuple[list[Path], list[int]]:
    """Return the local file paths and labels of ``data`` (a class folder or a manifest).

    Raises:
        BenchConfigError: ``data`` is not a local dataset.
        precompute.SourceError: ``data`` is missing, empty or malformed.
    """
    from precompute.sources.classes import list_source  # lazy: keeps `import benchmarks` light

    source = list_source(data)
    if not source.is_local:
        raise BenchConfigError(f"--data {data!r}: the benchmarks read local datasets only")
    paths = [Path(source.locate(key)) for key, _ in source.items]
    return paths, [label for _, label in source.items]


def num_classes(data: str) -> int:
    """Return the number of classes of ``data``."""
    from precompute.sources.classes import list_source

    return max(1, list_source(data).num_classes)
