"""Write in-memory arrays as a complete store with fields (format v2), for tests and fixtures.

The v2 sibling of :func:`precompute.pipeline.writer.write_store_from_arrays`: the same protocol as a
build (group with ``complete: false``, every shard with its marker, the completion marker
last), so the store is what ``precompute build`` would write for these values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from precompute.checks import size_hw
from precompute.errors import StoreError
from precompute.format.layout import StoreLayout
from precompute.pipeline.writer import create_or_resume, finalize, write_shard
from precompute.spec import BuildSpec

__all__ = ["write_fields_store"]


def _full(layout: StoreLayout, given: Mapping[str, Any], n: int) -> dict[str, Any]:
    """Every array of the layout: the given ones, defaults for ``valid``, ``extent``, ``key``."""
    arrays: dict[str, Any] = dict(given)
    arrays.setdefault("valid", np.ones(n, dtype=np.uint8))
    if "extent" in layout.arrays and "extent" not in arrays:
        whole = np.asarray([0, 0, *size_hw(layout.size)], np.int32)
        arrays["extent"] = np.where(np.asarray(arrays["valid"])[:, None] == 1, whole, 0)
    arrays.setdefault("key", [f"{i:08d}" for i in range(n)])
    missing = sorted(set(layout.arrays) - set(arrays))
    if missing:
        raise StoreError(f"no values for the store's array(s) {missing}")
    return arrays


def write_fields_store(
    root: str | Path,
    spec: BuildSpec,
    arrays: Mapping[str, Any],
    *,
    skipped: Sequence[Mapping[str, str]] = (),
    fingerprint: str = "arrays",
) -> StoreLayout:
    """Write ``arrays`` (name -> one value per sample) as a complete v2 store at ``root``.

    Args:
        root: The store folder (must not exist, or be empty).
        spec: A spec with ``fields`` (every option given: nothing is learned here).
        arrays: One array per field and companion, sample axis first; ``valid`` (default all
            1), ``extent`` (default the whole frame, zero for a hole) and ``key`` (default
            ``00000000``, ...) may be left out. Holes must hold each array's fill.
        skipped: Recorded in the report as the build's skipped inputs.
        fingerprint: The store's source fingerprint.

    Raises:
        StoreError: The spec has no fields, or an array is missing or of another shape.
    """
    if not spec.fields:
        raise StoreError(
            "write_fields_store needs a spec with fields (v1: write_store_from_arrays)"
        )
    n = len(next(iter(arrays.values()))) if arrays else 0
    layout = StoreLayout.from_spec(spec, n)
    data = _full(layout, arrays, n)
    create_or_resume(root, spec, layout, fingerprint)
    for shard in range(layout.num_shards):
        a, b = layout.shard_range(shard)
        write_shard(root, layout, shard, arrays={k: v[a:b] for k, v in data.items()})
    classes: dict[str, list[str]] = {}
    finalize(root, {"builder": "write_fields_store", "classes": classes, "skipped": list(skipped)})
    return layout
