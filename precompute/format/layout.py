"""Store format v1: names, geometry and the one function that opens a store for reading.

See ``docs/FORMAT.md`` for the prose version. Everything a reader needs to know about the
layout is derived here from the group attributes, so readers never guess.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from precompute.checks import Size, check_size, size_hw
from precompute.errors import SpecError, StoreError, StoreIncompleteError, StoreMetadataError
from precompute.fields import FieldSpec, parse_fields_table, v1_fields
from precompute.format.arrays import ArraySpec, store_arrays
from precompute.format.codecs import CodecSpec
from precompute.format.metajson import metadata_error, read_json
from precompute.format.storecheck import check_array_meta
from precompute.spec import BuildSpec
from precompute.storage.location import Location, location, store_path

__all__ = [
    "ATTR_KEY",
    "FIELDS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "StoreInfo",
    "StoreLayout",
    "foreign_entry",
    "forget_stop",
    "open_store_info",
    "record_stop",
    "shard_marker_path",
    "stop_reason",
]

FORMAT_NAME = "nostall.store"
FORMAT_VERSION = 1  # what a store without fields is written as
FORMAT_VERSIONS = (1, 2)  # what readers accept; 2: named fields (docs/FORMAT.md, "Format v2")
ATTR_KEY = "nostall"  # group attribute holding the store metadata
FIELDS = ("image", "label", "extent", "key")
MARKER_DIR = "_nostall"  # outside the Zarr hierarchy: per-shard progress markers and the lock
HOLE_LABEL = -1  # label of a slot whose input was skipped; its pixels are zero


@dataclass(frozen=True)
class StoreLayout:
    """Shapes and chunking of a store with ``num_samples`` slots.

    Attributes:
        num_samples: Number of sample slots N (holes included).
        size: Stored side length S, or ``"WxH"`` (a frame of width W and height H).
        variants: K stored copies per sample (1: no variant axis).
        shard_samples: Samples per shard file.
        chunk_samples: Samples per inner chunk.
        fields: The named fields of a v2 store; empty for v1 (``image`` + ``label``).
        codecs: ``(field, codec)`` pairs: the chunk codec of each coded field (the spec's
            ``codecs``); every other array is raw.
    """

    num_samples: int
    size: Size
    variants: int
    shard_samples: int
    chunk_samples: int
    fields: tuple[FieldSpec, ...] = ()
    codecs: tuple[tuple[str, CodecSpec], ...] = ()

    @classmethod
    def from_spec(cls, spec: BuildSpec, num_samples: int) -> StoreLayout:
        """Return the layout a build of ``spec`` over ``num_samples`` inputs writes.

        Raises:
            SpecError: A codec of the spec names no field of the layout, or one whose kind or
                storage refuses it (checked here, before anything is written).
        """
        fields: tuple[FieldSpec, ...] = tuple(getattr(spec, "fields", ()))
        layout = cls(
            num_samples,
            spec.size,
            spec.variants,
            spec.shard_samples,
            spec.chunk_samples,
            fields,
            tuple(getattr(spec, "codecs", ())),
        )
        layout.arrays  # noqa: B018  # the codecs checked against the fields now
        return layout

    @property
    def version(self) -> int:
        """The store format version: 2 with named fields, else 1."""
        return 2 if self.fields else 1

    @cached_property
    def arrays(self) -> Mapping[str, ArraySpec]:
        """Every array of the store by name (:func:`precompute.format.arrays.store_arrays`).

        Computed once per layout (readers look arrays up per chunk); do not modify it.
        """
        return store_arrays(self, self.fields, dict(self.codecs))

    @property
    def image_shape(self) -> tuple[int, ...]:
        """(N, S, S, 3) (``(N, H, W, 3)``), or (N, K, S, S, 3) when ``variants > 1``."""
        h, w = size_hw(self.size)
        return (
            (self.num_samples, h, w, 3)
            if self.variants == 1
            else (self.num_samples, self.variants, h, w, 3)
        )

    @property
    def image_shard(self) -> tuple[int, ...]:
        """Shard shape of ``image`` (whole samples, all variants)."""
        return (self.shard_samples, *self.image_shape[1:])

    @property
    def image_chunk(self) -> tuple[int, ...]:
        """Inner chunk shape of ``image`` (one variant of ``chunk_samples`` samples)."""
        h, w = size_hw(self.size)
        return (
            (self.chunk_samples, h, w, 3)
            if self.variants == 1
            else (self.chunk_samples, 1, h, w, 3)
        )

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

    def to_dict(self) -> dict[str, Any]:
        """Return the group attribute ``layout`` (fields are in their own ``fields`` table)."""
        return {
            "num_samples": self.num_samples,
            "size": self.size,
            "variants": self.variants,
            "shard_samples": self.shard_samples,
            "chunk_samples": self.chunk_samples,
        }


def shard_marker_path(root: str | Path | Location, shard: int) -> Any:
    """Return the path (a :class:`Location` in object storage) of ``shard``'s marker."""
    return store_path(root) / MARKER_DIR / "shards" / f"{shard:06d}.json"


@dataclass(frozen=True)
class StoreInfo:
    """What a reader needs to know about a complete store, read from its attributes."""

    path: Path | Location  # a Location for a store in object storage
    layout: StoreLayout
    spec: BuildSpec
    spec_hash: str
    source_fingerprint: str
    num_valid: int
    report: Mapping[str, Any]
    attrs: Mapping[str, Any]

    @property
    def fields(self) -> tuple[FieldSpec, ...]:
        """The store's fields; a v1 store reads as ``image`` + ``label`` (:func:`v1_fields`)."""
        if self.layout.fields:
            return self.layout.fields
        classes = self.report.get("num_classes")
        return v1_fields(classes if isinstance(classes, int) and classes > 0 else None)


def _read_group_attrs(root: Path | Location) -> Mapping[str, Any]:
    meta = root / "zarr.json"
    if not meta.is_file():
        local = root if isinstance(root, Path) else root.path() if root.local else None
        if local is not None and not os.path.lexists(local):
            raise StoreError(f"{root}: does not exist")
        raise StoreError(f"{root}: not a Zarr v3 group (no zarr.json)")
    doc = read_json(meta)
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
        raise StoreError(f"{root}: not a Zarr v3 group")
    attributes = doc.get("attributes", {})
    attrs = attributes.get(ATTR_KEY) if isinstance(attributes, Mapping) else None
    if not isinstance(attrs, Mapping):
        raise StoreError(f"{root}: not a nostall store (no '{ATTR_KEY}' group attribute)")
    return attrs


_LAYOUT_RANGE = {
    "num_samples": (0, 2**40),
    "size": (1, 2**16),
    "variants": (1, 2**16),
    "shard_samples": (1, 2**31),
    "chunk_samples": (1, 2**31),
}


def _size(meta: Path | Location, value: Any) -> Size:
    """The layout's ``size``: a side, or ``"WxH"`` text (a non-square frame)."""
    lo, hi = _LAYOUT_RANGE["size"]
    if isinstance(value, str) and "x" in value:
        try:
            size = check_size("size", value, lo, hi)
        except ValueError as exc:
            raise metadata_error(meta, f"{ATTR_KEY}.layout.size", str(exc)) from None
        if size == value:  # canonical text only: "64x64" is written 64
            return size
    if isinstance(value, str):
        raise metadata_error(
            meta, f"{ATTR_KEY}.layout.size", f"must be a side or 'WxH' text, got {value!r}"
        )
    return _int(meta, f"{ATTR_KEY}.layout.size", value, lo, hi)


def _int(meta: Path | Location, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise metadata_error(meta, key, f"must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def parse_layout(meta: Path | Location, attrs: Mapping[str, Any]) -> StoreLayout:
    """Return the :class:`StoreLayout` in group attributes ``attrs`` of file ``meta``.

    Raises:
        StoreMetadataError: A layout key is missing, unknown, of a wrong type or out of range.
    """
    value = attrs.get("layout")
    if not isinstance(value, Mapping) or set(value) != set(_LAYOUT_RANGE):
        raise metadata_error(
            meta,
            f"{ATTR_KEY}.layout",
            f"must map exactly {sorted(_LAYOUT_RANGE)} to integers, got {value!r}",
        )
    ints: dict[str, Any] = {
        k: _int(meta, f"{ATTR_KEY}.layout.{k}", value[k], *r)
        for k, r in _LAYOUT_RANGE.items()
        if k != "size"
    }
    ints["size"] = _size(meta, value["size"])
    layout = StoreLayout(**ints)  # fields: v2, below
    if layout.shard_samples % layout.chunk_samples:
        raise metadata_error(
            meta,
            f"{ATTR_KEY}.layout.chunk_samples",
            f"{layout.chunk_samples} does not divide shard_samples {layout.shard_samples}",
        )
    return layout


def _spec(meta: Path | Location, attrs: Mapping[str, Any], layout: StoreLayout) -> BuildSpec:
    try:
        spec = BuildSpec.from_dict(attrs.get("spec"))  # type: ignore[arg-type]
        wanted = StoreLayout.from_spec(spec, layout.num_samples)
    except SpecError as exc:
        raise metadata_error(meta, f"{ATTR_KEY}.spec", str(exc)) from exc
    if replace(wanted, codecs=()) != layout:
        raise metadata_error(
            meta,
            f"{ATTR_KEY}.layout",
            f"{layout.to_dict()} disagrees with "
            "the spec's size, variants, shard_samples or chunk_samples",
        )
    return spec


def _fields(meta: Path | Location, attrs: Mapping[str, Any], size: Size) -> tuple[FieldSpec, ...]:
    """The fields table of a v2 store, checked against what each kind's options give."""
    try:
        return parse_fields_table(attrs.get("fields"), size)
    except SpecError as exc:
        raise metadata_error(meta, f"{ATTR_KEY}.fields", str(exc)) from exc


def _text(
    meta: Path | Location, attrs: Mapping[str, Any], key: str, default: str | None = None
) -> str:
    value = attrs.get(key, default)
    if not isinstance(value, str):
        raise metadata_error(meta, f"{ATTR_KEY}.{key}", f"must be a string, got {value!r}")
    return value


def _check_header(root: Path | Location, attrs: Mapping[str, Any], require_complete: bool) -> None:
    version = attrs.get("version")
    if attrs.get("format") != FORMAT_NAME:
        raise StoreError(f"{root}: format {attrs.get('format')!r} is not {FORMAT_NAME!r}")
    if isinstance(version, bool) or version not in FORMAT_VERSIONS:
        raise StoreError(
            f"{root}: store format version {version!r}; this nostall reads "
            f"versions {', '.join(map(str, FORMAT_VERSIONS))}. Rebuild the store with this version."
        )
    complete = attrs.get("complete", False)
    if not isinstance(complete, bool):
        raise metadata_error(
            root / "zarr.json", f"{ATTR_KEY}.complete", f"must be true or false, got {complete!r}"
        )
    if require_complete and not complete:
        stopped = stop_reason(root)
        if stopped is not None:
            raise StoreIncompleteError(
                f"{root}: store is incomplete: its last build stopped on an error ({stopped}). "
                "Fix that (or build with --on-error skip), then re-run the same build: finished "
                "shards are kept."
            )
        raise StoreIncompleteError(
            f"{root}: store is incomplete (no completion marker); its build is running or was "
            "interrupted. Re-run the same build to resume it."
        )


_STOPPED = "stopped.json"  # in MARKER_DIR: why the last build of a partial store failed
_STOPPED_CHARS = 1000  # of the error kept


def record_stop(root: Path | Location, exc: BaseException) -> None:
    """Write why the build of ``root`` failed, for :func:`stop_reason` (best effort).

    A failure to write it is ignored: the build's own error is what the caller raises.
    """
    text = f"{type(exc).__name__}: {exc}"[:_STOPPED_CHARS]
    with contextlib.suppress(OSError, StoreError):
        (location(root) / MARKER_DIR / _STOPPED).write_bytes(json.dumps({"error": text}).encode())


def forget_stop(root: Path | Location) -> None:
    """Drop the record of a failed build (a new build of ``root`` is under way)."""
    (location(root) / MARKER_DIR / _STOPPED).delete()


def stop_reason(root: Path | Location) -> str | None:
    """Why the last build of the partial store ``root`` failed, or None (none recorded)."""
    try:
        doc = json.loads((location(root) / MARKER_DIR / _STOPPED).read_bytes())
    except (OSError, ValueError, StoreError):
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    return error if isinstance(error, str) else None


def foreign_entry(root: Location) -> str | None:
    """The first entry of folder (or prefix) ``root`` that is no store's, or None.

    None for a store (``zarr.json``), and for a folder that is missing, empty or holds only
    ``_nostall/`` (a build's lock and markers): a build may write there.
    """
    if (root / "zarr.json").exists():
        return None
    others = [name for name in root.store.list_dir(root.key) if name != MARKER_DIR]
    return others[0] if others else None


def open_store_info(path: str | Path | Location, *, require_complete: bool = True) -> StoreInfo:
    """Validate a store (a folder or an ``s3://`` URL) and return its :class:`StoreInfo`.

    Raises:
        StoreError: Not a store, another format or version, or a field is missing.
        StoreMetadataError: A ``zarr.json`` is cut or a key has a wrong type or value, or an
            array's shape or chunking differs from the group's layout (the message names the
            file and the key).
        StoreIncompleteError: The completion marker is missing (and ``require_complete``).
    """
    root = store_path(path)  # an s3:// URL: reads go to the object store
    meta = root / "zarr.json"
    attrs = _read_group_attrs(root)
    _check_header(root, attrs, require_complete)
    layout = parse_layout(meta, attrs)
    if attrs["version"] == 2:
        layout = replace(layout, fields=_fields(meta, attrs, layout.size))
    spec = _spec(meta, attrs, layout)
    layout = replace(layout, codecs=spec.codecs)  # the spec's codecs: each array's check
    for name in layout.arrays:  # each array's shape, dtype and chunking are the layout's
        try:  # one read of its zarr.json (one GET in object storage), not a stat first
            check_array_meta(root, layout, name)
        except StoreMetadataError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                raise StoreError(f"{root}: field '{name}' is missing") from exc
            raise
    num_valid = _int(
        meta,
        f"{ATTR_KEY}.num_valid",
        attrs.get("num_valid", layout.num_samples),
        0,
        layout.num_samples,
    )
    report = attrs.get("report", {})
    if not isinstance(report, Mapping):
        raise metadata_error(meta, f"{ATTR_KEY}.report", f"must be a mapping, got {report!r}")
    return StoreInfo(
        path=root,
        layout=layout,
        spec=spec,
        spec_hash=_text(meta, attrs, "spec_hash"),
        source_fingerprint=_text(meta, attrs, "source_fingerprint", ""),
        num_valid=num_valid,
        report=report,
        attrs=attrs,
    )
