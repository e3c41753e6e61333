"""Store format v1: names, geometry and the one function that opens a store for reading.

See ``docs/FORMAT.md`` for the prose version. Everything a reader needs to know about the
layout is derived here from the group attributes, so readers never guess.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precompute.errors import StoreError, StoreIncompleteError
from precompute.spec import BuildSpec

__all__ = [
    "ATTR_KEY",
    "FIELDS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "StoreInfo",
    "StoreLayout",
    "open_store_info",
    "shard_marker_path",
]

FORMAT_NAME = "nostall.store"
FORMAT_VERSION = 1
ATTR_KEY = "nostall"  # group attribute holding the store metadata
FIELDS = ("image", "label", "extent", "key")
MARKER_DIR = "_nostall"  # outside the Zarr hierarchy: per-shard progress markers and the lock
HOLE_LABEL = -1  # label of a slot whose input was skipped; its pixels are zero


@dataclass(frozen=True)
class StoreLayout:
    """Shapes and chunking of a store with ``num_samples`` slots.

    Attributes:
        num_samples: Number of sample slots N (holes included).
        size: Stored side length S.
        variants: K stored copies per sample (1: no variant axis).
        shard_samples: Samples per shard file.
        chunk_samples: Samples per inner chunk.
    """

    num_samples: int
    size: int
    variants: int
    shard_samples: int
    chunk_samples: int

    @classmethod
    def from_spec(cls, spec: BuildSpec, num_samples: int) -> StoreLayout:
        """Return the layout a build of ``spec`` over ``num_samples`` inputs writes."""
        return cls(num_samples, spec.size, spec.variants, spec.shard_samples, spec.chunk_samples)

    @property
    def image_shape(self) -> tuple[int, ...]:
        """(N, S, S, 3), or (N, K, S, S, 3) when ``variants > 1``."""
        s = self.size
        return (self.num_samples, s, s, 3) if self.variants == 1 else (
            self.num_samples, self.variants, s, s, 3)

    @property
    def image_shard(self) -> tuple[int, ...]:
        """Shard shape of ``image`` (whole samples, all variants)."""
        return (self.shard_samples, *self.image_shape[1:])

    @property
    def image_chunk(self) -> tuple[int, ...]:
        """Inner chunk shape of ``image`` (one variant of ``chunk_samples`` samples)."""
        s = self.size
        return (self.chunk_samples, s, s, 3) if self.variants == 1 else (
            self.chunk_samples, 1, s, s, 3)

    @property
    def extent_shape(self) -> tuple[int, ...]:
        """(N, 4), or (N, K, 4): valid region ``(top, left, height, width)`` per stored image."""
        return (self.num_samples, 4) if self.variants == 1 else (self.num_samples, self.variants, 4)

    @property
    def num_shards(self) -> int:
        """Number of shard files per array."""
        return max(1, math.ceil(self.num_samples / self.shard_samples))

    def shard_range(self, shard: int) -> tuple[int, int]:
        """Return the half-open sample range ``[start, stop)`` of ``shard``."""
        if not 0 <= shard < self.num_shards:
            raise IndexError(f"shard {shard} out of range [0, {self.num_shards})")
        start = shard * self.shard_samples
        return start, min(start + self.shard_samples, self.num_samples)

    def to_dict(self) -> dict[str, int]:
        """Return a JSON-ready dict."""
        return {
            "num_samples": self.num_samples,
            "size": self.size,
            "variants": self.variants,
            "shard_samples": self.shard_samples,
            "chunk_samples": self.chunk_samples,
        }


def shard_marker_path(root: str | Path, shard: int) -> Path:
    """Return the path of the marker that says ``shard`` is fully written."""
    return Path(root) / MARKER_DIR / "shards" / f"{shard:06d}.json"


@dataclass(frozen=True)
class StoreInfo:
    """What a reader needs to know about a complete store, read from its attributes."""

    path: Path
    layout: StoreLayout
    spec: BuildSpec
    spec_hash: str
    source_fingerprint: str
    num_valid: int
    report: Mapping[str, Any]
    attrs: Mapping[str, Any]


def _read_group_attrs(root: Path) -> Mapping[str, Any]:
    meta = root / "zarr.json"
    if not meta.is_file():
        raise StoreError(f"{root}: not a Zarr v3 group (no zarr.json)")
    try:
        doc = json.loads(meta.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{meta}: unreadable group metadata: {exc}") from exc
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
        raise StoreError(f"{root}: not a Zarr v3 group")
    attrs = doc.get("attributes", {}).get(ATTR_KEY)
    if not isinstance(attrs, Mapping):
        raise StoreError(f"{root}: not a nostall store (no '{ATTR_KEY}' group attribute)")
    return attrs


def open_store_info(path: str | Path, *, require_complete: bool = True) -> StoreInfo:
    """Validate a local store and return its :class:`StoreInfo`.

    Raises:
        StoreError: Not a store, another format or version, or a field is missing.
        StoreIncompleteError: The completion marker is missing (and ``require_complete``).
    """
    root = Path(path)
    attrs = _read_group_attrs(root)
    if attrs.get("format") != FORMAT_NAME:
        raise StoreError(f"{root}: format {attrs.get('format')!r} is not {FORMAT_NAME!r}")
    if attrs.get("version") != FORMAT_VERSION:
        raise StoreError(
            f"{root}: store format version {attrs.get('version')!r}; this nostall reads "
            f"version {FORMAT_VERSION}. Rebuild the store with this version."
        )
    if require_complete and not attrs.get("complete"):
        raise StoreIncompleteError(
            f"{root}: store is incomplete (no completion marker); its build is running or was "
            "interrupted. Re-run the same build to resume it."
        )
    for name in FIELDS:
        if not (root / name / "zarr.json").is_file():
            raise StoreError(f"{root}: field '{name}' is missing")
    layout = StoreLayout(**attrs["layout"])
    return StoreInfo(
        path=root,
        layout=layout,
        spec=BuildSpec.from_dict(attrs["spec"]),
        spec_hash=attrs["spec_hash"],
        source_fingerprint=attrs.get("source_fingerprint", ""),
        num_valid=int(attrs.get("num_valid", layout.num_samples)),
        report=attrs.get("report", {}),
        attrs=attrs,
    )
