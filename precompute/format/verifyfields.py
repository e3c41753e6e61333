"""``precompute verify``'s checks of the values of a store with fields (format v2).

Given one shard's arrays (read through Zarr, so every chunk's crc32c has been checked), the
checks are the kinds' own (``Kind.check_stored``: mask values within the classes or the ignore
index, keypoint visibility 0, 1 or 2, multi-hot 0 or 1, ...) plus the v2 rules every array
shares: ``valid`` holds only 0 and 1, a hole (``valid`` 0) has an empty key and every array's
fill value, a stored sample has a key. Each problem is one line naming the shard and the field.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from precompute.format.layout import StoreLayout

__all__ = ["field_problems", "valid_mask"]


def valid_mask(data: Mapping[str, np.ndarray]) -> np.ndarray:
    """The stored samples of a v2 shard (``valid`` 1)."""
    stored: np.ndarray = np.asarray(data["valid"]) == 1
    return stored


def _valid_values(shard: int, valid: np.ndarray) -> list[str]:
    bad = np.unique(valid[(valid != 0) & (valid != 1)])
    if bad.size:
        return [f"shard {shard}: valid: values {bad.tolist()[:5]} are not 0 or 1"]
    return []


def _holes(shard: int, layout: StoreLayout, data: Mapping[str, np.ndarray]) -> list[str]:
    holes = ~valid_mask(data)
    problems = []
    if np.any(holes != (data["key"] == "")):
        problems.append(f"shard {shard}: key: holes (valid 0) and empty keys disagree")
    for name, a in layout.arrays.items():
        if a.sharded and name != "valid" and np.any(data[name][holes] != a.fill):
            problems.append(f"shard {shard}: {name}: a hole does not hold the fill value {a.fill}")
    return problems


def field_problems(shard: int, layout: StoreLayout, data: Mapping[str, np.ndarray]) -> list[str]:
    """Return one line per problem in the values of one shard of a v2 store."""
    problems = _valid_values(shard, np.asarray(data["valid"]))
    problems += _holes(shard, layout, data)
    stored = valid_mask(data)
    for f in layout.fields:
        try:
            f.spec.check_stored(np.asarray(data[f.name])[stored], f.options)
        except ValueError as exc:
            problems.append(f"shard {shard}: field {f.name!r} ({f.kind}): {exc}")
    return problems
