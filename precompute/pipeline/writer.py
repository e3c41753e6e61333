"""Write a store: create or resume, write whole shards, publish metadata last.

The protocol (see ``docs/FORMAT.md``):

1. :func:`create_or_resume` writes the group with ``complete: false`` and the four arrays, or,
   for an existing incomplete store with the same spec, source and layout, keeps it.
2. :func:`write_shard` writes one shard-aligned slice of every array, then an atomic marker
   ``_nostall/shards/NNNNNN.json``. Exactly one task writes a given shard.
3. :func:`finalize` checks that every shard has its marker, folds the markers into the build
   report and only then rewrites the group attributes with ``complete: true``.

A store whose attributes lack ``complete: true`` is never opened for reading. An ``s3://``
root follows the same protocol through :mod:`precompute.storage.remote_writer`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.array_spec import ArrayConfig

from precompute.arrays.bandstats import fold_markers
from precompute.errors import StoreError, StoreMismatchError
from precompute.fields import fields_table
from precompute.format.atomic import atomic_write_bytes
from precompute.format.layout import (
    ATTR_KEY,
    FORMAT_NAME,
    HOLE_LABEL,
    MARKER_DIR,
    StoreLayout,
    _read_group_attrs,
    shard_marker_path,
)
from precompute.format.shardcodec import raw_writable, write_raw_shard
from precompute.format.storecheck import file_digest, shard_file
from precompute.notes import fold as fold_notes
from precompute.spec import BuildSpec
from precompute.storage.objstore import is_object_url

__all__ = [
    "atomic_write_bytes",
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
        group.create_array(
            name,
            shape=a.shape,
            dtype=str if a.dtype == "string" else a.dtype,
            fill_value=a.fill,
            compressors=[Crc32cCodec()],
            overwrite=True,
            **kw,
        )


def create_or_resume(
    root: str | Path, spec: BuildSpec, layout: StoreLayout, fingerprint: str
) -> set[int]:
    """Create a new incomplete store, or validate an interrupted one for resuming.

    Returns:
        The shards already written (empty for a new store).

    Raises:
        StoreMismatchError: ``root`` holds a store of another spec, source or layout.
        StoreError: ``root`` is complete already, or is a non-empty non-store folder.
    """
    if is_object_url(root):  # s3://: written locally, PUT as whole objects
        from precompute.storage import remote_writer  # imports this module

        return remote_writer.create_or_resume(str(root), spec, layout, fingerprint)
    root = Path(root)
    header = _header(spec, layout, fingerprint)
    if (root / "zarr.json").exists():
        old = _read_group_attrs(root)
        for key in ("format", "version", "spec_hash", "source_fingerprint", "layout"):
            if old.get(key) != header[key]:
                raise StoreMismatchError(
                    f"{root}: existing store differs in {key} ({old.get(key)!r} != "
                    f"{header[key]!r}); choose another --out or remove it"
                )
        if old.get("complete"):
            raise StoreError(f"{root}: store is already complete")
        missing = [n for n in layout.arrays if not (root / n / "zarr.json").is_file()]
        if missing:  # interrupted between creating the group and its arrays
            _create_arrays(zarr.open_group(str(root), mode="r+"), layout, missing)
        return done_shards(root, layout)
    if root.exists() and any(p.name != MARKER_DIR for p in root.iterdir()):
        raise StoreError(f"{root}: exists, is not empty and is not a nostall store")
    shutil.rmtree(root / MARKER_DIR / "shards", ignore_errors=True)  # stale markers, no store
    # mode "a", not "w": "w" would delete _nostall/ and with it the held build lock
    group = zarr.open_group(str(root), mode="a", zarr_format=3, attributes={ATTR_KEY: header})
    _create_arrays(group, layout)
    return set()


def done_shards(root: str | Path, layout: StoreLayout) -> set[int]:
    """Return the shards whose completion markers exist and parse."""
    done = set()
    for shard in range(layout.num_shards):
        marker = shard_marker_path(root, shard)
        try:
            json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        done.add(shard)
    return done


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
    root: str | Path,
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
    if is_object_url(root):
        from precompute.storage import remote_writer

        remote_writer.write_shard(
            str(root), layout, shard, arrays=given, skipped=skipped, stats=stats
        )
        return
    root = Path(root)
    start, stop = layout.shard_range(shard)
    data = _shard_arrays(layout, shard, given)
    files = {}
    for name, arr in data.items():  # every chunk written, fill values too: no file is optional
        a = layout.arrays[name]
        path = shard_file(root, layout, name, shard)
        if raw_writable(a.shape, a.shard, a.chunk, a.dtype):  # the file zarr would write
            files[name] = write_raw_shard(
                path, arr, shape=a.shape, shard_shape=a.shard, chunk_shape=a.chunk,
                dtype=a.dtype, fill=a.fill, shard=shard,
            )  # fmt: skip
        else:  # key (variable-length strings) and variant-chunked arrays
            zarr.open_array(str(root / name), mode="r+").with_config(_DENSE)[start:stop] = arr
            files[name] = file_digest(path)
    marker = {
        "shard": shard,
        "start": start,
        "stop": stop,
        "num_valid": num_valid(data),
        "skipped": list(skipped),
        "stats": dict(stats or {}),
        "files": {name: files[name] for name in layout.arrays},
    }
    atomic_write_bytes(shard_marker_path(root, shard), json.dumps(marker).encode())


def finalize(root: str | Path, report: Mapping[str, Any]) -> dict[str, Any]:
    """Publish the store: fold shard markers into the report and set ``complete: true``.

    Raises:
        StoreError: A shard has no marker (the store stays incomplete).
    """
    if is_object_url(root):
        from precompute.storage import remote_writer

        return remote_writer.finalize(str(root), report)
    root = Path(root)
    attrs = dict(_read_group_attrs(root))
    layout = StoreLayout(**attrs["layout"])
    markers = []
    for shard in range(layout.num_shards):
        try:
            markers.append(json.loads(shard_marker_path(root, shard).read_text()))
        except (OSError, ValueError) as exc:
            msg = f"{root}: shard {shard} is not written; store left incomplete"
            raise StoreError(msg) from exc
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
    attrs["complete"] = True
    group = zarr.open_group(str(root), mode="r+")
    group.attrs.update({ATTR_KEY: attrs})  # the completion marker: written last
    return attrs


def write_store_from_arrays(
    root: str | Path,
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
        extents[..., 2:] = spec.size
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
