"""Write a store: create or resume, write whole shards, publish metadata last.

The protocol (see ``docs/FORMAT.md``):

1. :func:`create_or_resume` writes the group with ``complete: false`` and the four arrays, or,
   for an existing incomplete store with the same spec, source and layout, keeps it.
2. :func:`write_shard` writes one shard-aligned slice of every array, then an atomic marker
   ``_nostall/shards/NNNNNN.json``. Exactly one task writes a given shard.
3. :func:`finalize` checks that every shard has its marker, folds the markers into the build
   report and only then rewrites the group attributes with ``complete: true``.

A store whose attributes lack ``complete: true`` is never opened for reading. Every byte goes
through the store's :class:`~precompute.storage.base.ByteStore` (a folder or an object store,
the same code): each shard file is encoded in memory (:mod:`precompute.format.shardcodec`, or
zarr-python into a memory store) and written whole, one atomic rename or one PUT; the metadata
is zarr-python's, written through its own store class for the kind of store.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.array_spec import ArrayConfig

from precompute.arrays.bandstats import fold_markers
from precompute.checks import size_hw
from precompute.errors import StoreError
from precompute.fields import fields_table, parse_fields_table
from precompute.format.arrays import ArraySpec
from precompute.format.atomic import atomic_write_bytes
from precompute.format.classcounts import write_class_counts
from precompute.format.layout import (
    ATTR_KEY,
    FORMAT_NAME,
    HOLE_LABEL,
    MARKER_DIR,
    StoreLayout,
    _read_group_attrs,
    foreign_entry,
    shard_marker_path,
)
from precompute.format.shardcodec import encode_raw_shard, raw_writable
from precompute.format.storecheck import shard_file
from precompute.notes import fold as fold_notes
from precompute.pipeline.replace import differences, other_store
from precompute.spec import BuildSpec
from precompute.storage.location import Location, location

__all__ = [
    "atomic_write_bytes",
    "check_resumable",
    "create_or_resume",
    "done_shards",
    "finalize",
    "num_valid",
    "write_shard",
    "write_store_from_arrays",
]

_DENSE = ArrayConfig(order="C", write_empty_chunks=True)  # every shard file exists (FORMAT.md)


def _header(spec: BuildSpec, layout: StoreLayout, fingerprint: str) -> dict[str, Any]:
    header = {
        "format": FORMAT_NAME,
        "version": layout.version,
        "spec": spec.to_dict(),
        "spec_hash": spec.digest(),
        "source_fingerprint": fingerprint,
        "layout": layout.to_dict(),
        "complete": False,
    }
    if layout.fields:  # format v2: the fields table (docs/FORMAT.md)
        header["fields"] = fields_table(layout.fields, layout.size)
    return header


def _create_arrays(
    group: zarr.Group, layout: StoreLayout, names: Sequence[str] | None = None
) -> None:
    """Create the arrays with the geometry and dtypes that ``format.storecheck`` checks."""
    for name, a in layout.arrays.items():
        if names is not None and name not in names:
            continue
        kw: dict[str, Any] = (
            dict(shards=a.shard, chunks=a.chunk, filters=None)
            if a.sharded
            else dict(chunks=a.shard)  # key: one plain chunk per shard
        )
        compressors: list[Any] = [Crc32cCodec()]  # the crc32c last: over the bytes as stored
        if a.codec is not None:  # a chunk codec (precompute.format.codecs) before it
            kw["serializer"], before = a.codec.codec.zarr(a.codec.options)
            compressors = [*before, *compressors]
        group.create_array(
            name,
            shape=a.shape,
            dtype=str if a.dtype == "string" else a.dtype,
            fill_value=a.fill,
            compressors=compressors,
            overwrite=True,
            **kw,
        )


def create_or_resume(
    root: str | Path | Location, spec: BuildSpec, layout: StoreLayout, fingerprint: str
) -> set[int]:
    """Create a new incomplete store, or validate an interrupted one for resuming.

    Returns:
        The shards already written (empty for a new store).

    Raises:
        StoreMismatchError: ``root`` holds a store of another spec, source or layout.
        StoreError: ``root`` is complete already, or is a non-empty non-store folder.
    """
    root = location(root)
    header = _header(spec, layout, fingerprint)
    if check_resumable(root, spec, layout, fingerprint):
        missing = [n for n in layout.arrays if not (root / n / "zarr.json").exists()]
        if missing:  # interrupted between creating the group and its arrays
            group = zarr.open_group(store=root.zarr(read_only=False), mode="r+")
            _create_arrays(group, layout, missing)
        return done_shards(root, layout)
    markers = root / MARKER_DIR / "shards"
    for stale in markers.list():  # markers without a store: not ours
        markers.store.delete(stale)
    # mode "a", not "w": "w" would delete _nostall/ and with it the held build lock
    group = zarr.open_group(
        store=root.zarr(read_only=False), mode="a", zarr_format=3, attributes={ATTR_KEY: header}
    )
    _create_arrays(group, layout)
    return set()


def check_resumable(
    root: str | Path | Location, spec: BuildSpec, layout: StoreLayout, fingerprint: str
) -> bool:
    """Refuse a build of ``root`` that would not resume its store; write nothing either way.

    Returns:
        Whether ``root`` holds this build's incomplete store (False: nothing is there yet).

    Raises:
        StoreMismatchError: ``root`` holds a store of another spec, source or layout (the
            message names each difference: :func:`~precompute.pipeline.replace.differences`).
        StoreError: ``root`` is complete already, or is a non-empty non-store folder.
    """
    root = location(root)
    if (root / "zarr.json").exists():
        old = _read_group_attrs(root)
        found = differences(old, spec, fingerprint, layout)
        if found:
            raise other_store(root, "complete" if old.get("complete") else "half-built", found)
        if old.get("complete"):
            raise StoreError(f"{root}: store is already complete")
        return True
    foreign = foreign_entry(root)  # checked before the lock too (check_output): a race
    if foreign is not None:
        raise StoreError(
            f"{root}: is not empty (it holds {root / foreign}) and is not a nostall store"
        )
    return False


def done_shards(root: str | Path | Location, layout: StoreLayout) -> set[int]:
    """Return the shards whose completion markers exist and parse (one listing, then reads)."""
    return set(_markers(location(root), layout))


def _markers(root: Location, layout: StoreLayout) -> dict[int, Any]:
    """The parsed markers of the shards written so far, by shard."""
    present = (root / MARKER_DIR / "shards").list()
    found = {}
    for shard in range(layout.num_shards):
        marker = root / MARKER_DIR / "shards" / f"{shard:06d}.json"
        if marker.key not in present:
            continue
        try:
            found[shard] = json.loads(marker.read_bytes())
        except (OSError, ValueError):
            continue
    return found


def _shard_arrays(
    layout: StoreLayout, shard: int, arrays: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """``arrays`` as numpy arrays, checked against the layout's table: every array, its shape."""
    start, stop = layout.shard_range(shard)
    missing = sorted(set(layout.arrays) - set(arrays))
    extra = sorted(set(arrays) - set(layout.arrays))
    if missing or extra:
        raise StoreError(f"shard {shard}: arrays missing {missing}, not in the store {extra}")
    out = {}
    for name, a in layout.arrays.items():
        arr = np.asarray(arrays[name], dtype=str) if name == "key" else np.asarray(arrays[name])
        want = (stop - start, *a.shape[1:])
        if tuple(arr.shape) != want:
            raise StoreError(f"shard {shard}: {name} has shape {arr.shape}, want {want}")
        out[name] = arr
    return out


def num_valid(arrays: Mapping[str, np.ndarray]) -> int:
    """v2: the count of ``valid``; v1: the labels that are not ``-1``."""
    if "valid" in arrays:
        return int(np.count_nonzero(arrays["valid"]))
    return int(np.count_nonzero(arrays["label"] != HOLE_LABEL))


def write_shard(
    root: str | Path | Location,
    layout: StoreLayout,
    shard: int,
    *,
    arrays: Mapping[str, Any] | None = None,
    image: np.ndarray | None = None,
    label: np.ndarray | None = None,
    extent: np.ndarray | None = None,
    key: Sequence[str] | None = None,
    skipped: Sequence[Mapping[str, Any]] = (),
    stats: Mapping[str, Any] | None = None,
) -> None:
    """Write every array's slice of ``shard``, then its marker (atomically, last).

    ``arrays`` maps every array of the layout's table (:attr:`StoreLayout.arrays`) to its
    slice; a v1 store's may be given as ``image``, ``label``, ``extent`` and ``key`` instead.
    Every inner chunk is written, also one that holds only fill values, so every shard file
    exists; the marker records each file's size and sha256 (``files``). Holes (skipped inputs)
    must already carry each array's fill (v1: label ``-1`` and zero pixels; v2: ``valid`` 0).
    """
    given = dict(arrays or {})
    v1 = {"image": image, "label": label, "extent": extent, "key": key}
    given.update({k: v for k, v in v1.items() if v is not None})
    root = location(root)
    start, stop = layout.shard_range(shard)
    data = _shard_arrays(layout, shard, given)
    files = {}
    for name, arr in data.items():  # every chunk written, fill values too: no file is optional
        target = shard_file(root, layout, name, shard)
        parts, files[name] = _encode(root, layout, name, shard, arr)
        target.store.put(target.key, parts)
    marker = {
        "shard": shard,
        "start": start,
        "stop": stop,
        "num_valid": num_valid(data),
        "skipped": list(skipped),
        "stats": dict(stats or {}),
        "files": {name: files[name] for name in layout.arrays},
    }
    target = shard_marker_path(root, shard)
    target.store.put(target.key, json.dumps(marker).encode())  # last


def _encode(
    root: Location, layout: StoreLayout, name: str, shard: int, values: np.ndarray
) -> tuple[list[Any], dict[str, Any]]:
    """The bytes of array ``name``'s file of ``shard``, in parts, and their size and sha256."""
    a = layout.arrays[name]
    if raw_writable(a.shape, a.shard, a.chunk, a.dtype):  # the file zarr would write
        where = str(shard_file(root, layout, name, shard))
        return encode_raw_shard(
            values, shape=a.shape, shard_shape=a.shard, chunk_shape=a.chunk,
            dtype=a.dtype, fill=a.fill, shard=shard, where=where, codec=a.codec,
        )  # fmt: skip
    # key (variable-length strings) and variant-chunked arrays: zarr-python encodes the shard
    # into a memory store holding only the array's metadata
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    meta = dict(_array_meta(str(root), tuple(layout.arrays.values())))[name]
    held = {"zarr.json": default_buffer_prototype().buffer.from_bytes(meta)}
    start, stop = layout.shard_range(shard)
    array = zarr.open_array(store=MemoryStore(held), mode="r+").with_config(_DENSE)
    array[start:stop] = values
    chunk = "/".join(["c", str(shard), *(["0"] * (len(a.shape) - 1))])
    data = held[chunk].to_bytes()
    return [data], {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@functools.lru_cache(maxsize=16)
def _array_meta(url: str, arrays: tuple[ArraySpec, ...]) -> tuple[tuple[str, bytes], ...]:
    """Each array's ``zarr.json`` under ``url``: one read each per process, store and arrays.

    A build never changes an array's metadata once :func:`create_or_resume` has written it,
    and that metadata is a function of the :class:`ArraySpec` alone (part of the key): a store
    rebuilt at ``url`` with other arrays is read afresh.
    """
    root = location(url)
    return tuple((a.name, (root / a.name / "zarr.json").read_bytes()) for a in arrays)


def finalize(root: str | Path | Location, report: Mapping[str, Any]) -> dict[str, Any]:
    """Publish the store: fold shard markers into the report and set ``complete: true``.

    Raises:
        StoreError: A shard has no marker (the store stays incomplete).
    """
    root = location(root)
    attrs = dict(_read_group_attrs(root))
    layout = StoreLayout(**attrs["layout"])
    found = _markers(root, layout)
    for shard in range(layout.num_shards):
        if shard not in found:
            raise StoreError(f"{root}: shard {shard} is not written; store left incomplete")
    markers = [found[shard] for shard in range(layout.num_shards)]
    skipped = [*report.get("skipped", ()), *(s for m in markers for s in m["skipped"])]
    attrs["num_valid"] = sum(m["num_valid"] for m in markers)
    attrs["report"] = {
        **report,
        "num_samples": layout.num_samples,
        "num_valid": attrs["num_valid"],
        "skipped": skipped,
    }
    truncated = sorted(k for m in markers for k in m.get("stats", {}).get("truncated", ()))
    if truncated:  # inputs kept with the data that was there (an audio file cut short)
        attrs["report"]["truncated"] = truncated
    notes = {
        **report.get("notes", {}),  # about the source as a whole (one class)
        **fold_notes(m.get("stats", {}).get("notes", {}) for m in markers),
    }
    if notes:  # inputs kept with something the user should know (precompute.notes)
        attrs["report"]["notes"] = notes
    bands = fold_markers(markers)  # per-band statistics of spectral fields (docs/arrays.md)
    if bands:
        attrs["report"]["band_stats"] = bands
    fields = parse_fields_table(attrs["fields"], layout.size) if attrs.get("fields") else ()
    write_class_counts(root, fields, markers)  # beside the store, before it is complete
    attrs["complete"] = True
    group = zarr.open_group(store=root.zarr(read_only=False), mode="r+")
    group.attrs.update({ATTR_KEY: attrs})  # the completion marker: written last
    return attrs


def write_store_from_arrays(
    root: str | Path | Location,
    images: np.ndarray,
    labels: np.ndarray,
    spec: BuildSpec,
    *,
    keys: Sequence[str] | None = None,
    extents: np.ndarray | None = None,
    fingerprint: str = "arrays",
) -> StoreLayout:
    """Write in-memory arrays as a complete store (for tests, fixtures and benchmarks).

    ``images`` is (N, S, S, 3) or (N, K, S, S, 3) uint8 matching ``spec.size`` and
    ``spec.variants``.
    """
    images = np.asarray(images, dtype=np.uint8)
    layout = StoreLayout.from_spec(spec, len(images))
    if tuple(images.shape) != layout.image_shape:
        raise StoreError(f"images have shape {images.shape}, want {layout.image_shape}")
    labels = np.asarray(labels, dtype=np.int64)
    keys = list(keys) if keys is not None else [f"{i:08d}" for i in range(len(images))]
    if extents is None:
        extents = np.zeros(layout.extent_shape, dtype=np.int32)
        extents[..., 2:] = size_hw(spec.size)
    create_or_resume(root, spec, layout, fingerprint)
    for shard in range(layout.num_shards):
        a, b = layout.shard_range(shard)
        write_shard(
            root,
            layout,
            shard,
            image=images[a:b],
            label=labels[a:b],
            extent=extents[a:b],
            key=keys[a:b],
        )
    finalize(root, {"builder": "write_store_from_arrays"})
    return layout
