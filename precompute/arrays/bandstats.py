"""Per-band statistics of a build: one partial per shard marker, folded when the store is published.

Every spatial ``array`` field (bands last: a field whose loader rule is ``array``) gets a
:func:`~precompute.arrays.stats.partial` of its shard's valid pixels (valid samples, inside
their ``extent``: letterbox borders and holes are left out), and so does every field whose
kind gives its values as bands (``Kind.band_values``: an audio feature's mel bands or MFCCs
over each clip's valid frames). The shard task writes them in
its marker (``stats.bands.FIELD``); :func:`fold_markers` merges the markers' partials in
shard order at finalize and the store's attributes keep the result as
``report.band_stats.FIELD`` (:meth:`~precompute.arrays.stats.BandStats.to_dict`: ``count``,
``mean``, ``std``, ``min``, ``max``, ``m2`` per band, float64).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from precompute.arrays.stats import BandStats, merge, partial

__all__ = ["band_fields", "band_lines", "fold_markers", "shard_band_stats"]


def band_fields(fields: Iterable[Any]) -> list[str]:
    """The names of the fields with per-band statistics (loader rule ``array``)."""
    return [f.name for f in fields if f.augment == "array"]


def _valid_pixels(arrays: Mapping[str, Any], n: int, hw: tuple[int, int]) -> np.ndarray:
    """``(n, H, W)``: True inside the extent of each valid sample."""
    mask = np.zeros((n, *hw), dtype=bool)
    valid = np.asarray(arrays.get("valid", np.ones(n)), dtype=bool)
    extent = np.asarray(arrays["extent"])
    for j in np.flatnonzero(valid):
        top, left, h, w = (int(v) for v in extent[j])
        mask[j, top : top + h, left : left + w] = True
    return mask


def shard_band_stats(fields: Iterable[Any], arrays: Mapping[str, Any]) -> dict[str, Any]:
    """``{FIELD: partial.to_dict()}`` of one shard's arrays (empty without such a field)."""
    out: dict[str, Any] = {}
    spatial = set(band_fields(fields))
    for f in fields:
        if f.name in spatial:
            values = np.asarray(arrays[f.name])
            mask = _valid_pixels(arrays, values.shape[0], values.shape[1:3])
            out[f.name] = partial(values, mask).to_dict()
            continue
        view = f.spec.band_values(f.name, arrays, f.options)
        if view is not None:
            out[f.name] = partial(*view).to_dict()
    return out


def fold_markers(markers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{FIELD: merged.to_dict()}`` of the markers' ``stats.bands`` partials (shard order)."""
    folded: dict[str, BandStats] = {}
    for marker in markers:
        for name, part in marker.get("stats", {}).get("bands", {}).items():
            stats = BandStats.from_dict(part)
            folded[name] = merge(folded[name], stats) if name in folded else stats
    return {name: stats.to_dict() for name, stats in folded.items()}


def _range(values: list[Any]) -> str:
    known = [v for v in values if v is not None]
    return f"{min(known):.4g}..{max(known):.4g}" if known else "none"


def band_lines(report: Mapping[str, Any]) -> list[str]:
    """``precompute inspect``'s lines of ``report.band_stats``: per field, bands and ranges."""
    lines = []
    for name, s in report.get("band_stats", {}).items():
        lines.append(
            f"bands      {name}: {len(s['count'])} bands, mean {_range(s['mean'])}, "
            f"std {_range(s['std'])}, min {_range(s['min'])}, max {_range(s['max'])}"
        )
    return lines
