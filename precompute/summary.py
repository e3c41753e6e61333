"""Human-readable summary of a store (``precompute inspect``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from precompute.format import MARKER_DIR, open_store_info
from precompute.objstore import is_object_url, list_sizes

__all__ = ["store_summary"]


def _status(path: Path, attrs: dict[str, Any], num_shards: int) -> str:
    if attrs.get("complete"):
        return "complete"
    markers = path / MARKER_DIR / "shards"
    if is_object_url(path):
        done = sum(url.endswith(".json") for url in list_sizes(str(markers)))
    else:
        done = len(list(markers.glob("*.json")))
    return f"INCOMPLETE ({done}/{num_shards} shards written; build running or interrupted)"


def store_summary(path: str | Path, max_skipped: int = 50) -> str:
    """Return a multi-line summary of the store at ``path`` (complete or not; or ``s3://``).

    Raises:
        StoreError: ``path`` is not a nostall store.
    """
    info = open_store_info(path, require_complete=False)
    attrs, lay, spec = dict(info.attrs), info.layout, info.spec
    rep: dict[str, Any] = dict(info.report)
    lines = [
        f"store      {info.path}",
        f"status     {_status(info.path, attrs, lay.num_shards)}",
        f"samples    {lay.num_samples} slots, {info.num_valid} valid"
        + (f", {len(rep.get('skipped', []))} skipped" if rep else ""),
        f"image      {lay.size}x{lay.size}x3 uint8, mode {spec.mode}, variants {lay.variants}",
        f"shards     {lay.num_shards} x {lay.shard_samples} samples, chunks of {lay.chunk_samples}",
        f"spec       seed {spec.seed}, on_error {spec.on_error}, max_pixels {spec.max_pixels}, "
        f"hash {info.spec_hash[:16]}",
        f"source     {rep.get('source', '?')} (fingerprint {info.source_fingerprint[:16]})",
    ]
    if rep.get("classes") == [] and rep.get("num_classes"):
        lines.append(f"classes    integer labels as given, largest {rep['num_classes'] - 1}")
    elif rep.get("classes") is not None:
        classes = rep["classes"]
        shown = ", ".join(classes[:10]) + (", ..." if len(classes) > 10 else "")
        lines.append(f"classes    {len(classes)}: {shown}")
    if "seconds" in rep:
        lines.append(
            f"build      {rep['seconds']:.1f} s, {rep.get('samples_per_s', 0):.1f} "
            f"samples/s, {rep.get('bytes_written', 0) / 1e6:.1f} MB written"
        )
    skipped = rep.get("skipped", [])
    for item in skipped[:max_skipped]:
        lines.append(f"skipped    {item['key']}: {item['reason']}")
    if len(skipped) > max_skipped:
        lines.append(f"skipped    ... and {len(skipped) - max_skipped} more (see --json)")
    return "\n".join(lines)
