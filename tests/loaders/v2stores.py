"""Small, honest v2 stores (named fields) written straight from ``docs/FORMAT.md``, for tests.

This writes what FORMAT.md says a v2 store is, independently of the build (so the loader is
held to the format's text, not only to what the writer happens to do):
group attributes ``format``, ``version: 2``, ``spec`` (a ``BuildSpec.to_dict()`` plus
``"fields": [FieldSpec.to_dict(), ...]``), ``spec_hash`` (sha256 of that spec's canonical
JSON), ``layout``, the ``fields`` table of :func:`precompute.fields.fields_table`,
``num_valid``, ``report``, ``complete: true``; arrays made from ``layout.arrays`` by the
writer's own ``_create_arrays`` (so their metadata is the real build's), every inner chunk
written. Shard markers are not written: the loader does not read them.

:func:`make_v2_index_store` fills every field from the sample's index, so a test can check
that batch row ``i`` holds sample ``index[i]``'s data in every field:

* ``image``: channel 0 ``i % 256``, channel 1 ``i // 256``, channel 2 the variant (as
  :func:`tests.contracts.index_store.make_index_store`);
* ``mask``: :func:`index_mask` (``(row // 4 + col // 4 + i) % 4``);
* ``keypoints``: :func:`index_points`;
* ``label``: ``i % 7``; holes: each kind's hole value and ``valid`` 0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.array_spec import ArrayConfig

from precompute.fields import FieldSpec, fields_table
from precompute.format.layout import ATTR_KEY, FORMAT_NAME, StoreLayout
from precompute.pipeline.writer import _create_arrays
from precompute.spec import BuildSpec
from tests.contracts.index_store import index_images

__all__ = [
    "CLASSES",
    "NUM_CLASSES",
    "POINTS",
    "check_index_rows",
    "index_fields",
    "index_mask",
    "index_points",
    "make_v2_index_store",
    "write_v2_store",
]

NUM_CLASSES = 7  # label = index % 7, as the v1 index store
CLASSES = 4  # mask classes
POINTS = 3
_DENSE = ArrayConfig(order="C", write_empty_chunks=True)


def index_fields(flip_pairs: Sequence[Sequence[int]] = ((0, 2),)) -> tuple[FieldSpec, ...]:
    """``image`` + ``mask`` (4 classes) + ``keypoints`` (3 points) + ``label`` (7 classes)."""
    return (
        FieldSpec("image", "image", {"channels": 3}),
        FieldSpec("mask", "mask", {"classes": CLASSES}),
        FieldSpec("keypoints", "keypoints", {"points": POINTS, "flip_pairs": flip_pairs}),
        FieldSpec("label", "label", {"classes": NUM_CLASSES}),
    )


def index_mask(index: Any, size: int) -> np.ndarray:
    """``[len(index), size, size]`` uint8: ``(row // 4 + col // 4 + i) % 4``."""
    idx = np.asarray(index, np.int64).reshape(-1, 1, 1)
    rows, cols = np.ogrid[:size, :size]
    return ((rows // 4 + cols // 4 + idx) % CLASSES).astype(np.uint8)


def index_points(index: Any, size: int) -> np.ndarray:
    """``[len(index), 3, 3]`` float32 ``(x, y, v)``: pixel centres and visibility from ``i``."""
    idx = np.asarray(index, np.int64).reshape(-1, 1)
    p = np.arange(POINTS).reshape(1, -1)
    x = (idx + 5 * p) % size + 0.5
    y = (3 * idx + p) % size + 0.5
    v = 1 + (idx + p) % 2
    return np.stack([x, y, v], -1).astype(np.float32)


def spec_dict(spec: BuildSpec, fields: Sequence[FieldSpec]) -> dict[str, Any]:
    """The v2 ``spec`` attribute: the build spec's dict with ``fields`` added."""
    return {**spec.to_dict(), "fields": [f.to_dict() for f in fields]}


def _hash(spec: Mapping[str, Any]) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def write_v2_store(
    root: str | Path,
    fields: Sequence[FieldSpec],
    data: Mapping[str, np.ndarray],
    spec: BuildSpec,
    *,
    valid: np.ndarray,
    extents: np.ndarray | None = None,
) -> Path:
    """Write a complete v2 store of ``fields`` with arrays ``data`` (one per field).

    Args:
        root: The store folder (must not exist).
        fields: The store's fields.
        data: Field (or companion) name -> ``(N, ...)`` array of the table's shape.
        spec: Size, chunking and variants.
        valid: ``(N,)`` 1 for a stored sample, 0 for a hole.
        extents: ``(N, 4)`` (or ``(N, K, 4)``) extents; default the whole image.
    """
    n = len(valid)
    layout = replace(StoreLayout.from_spec(spec, n), fields=tuple(fields))
    sdict = spec_dict(spec, fields)
    attrs: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": 2,
        "spec": sdict,
        "spec_hash": _hash(sdict),
        "source_fingerprint": "v2stores",
        "layout": layout.to_dict(),
        "fields": fields_table(fields, spec.size),
        "complete": False,
    }
    group = zarr.open_group(str(root), mode="w-", zarr_format=3, attributes={ATTR_KEY: attrs})
    _create_arrays(group, layout)
    arrays = dict(data)
    arrays["valid"] = np.asarray(valid, np.uint8)
    arrays["key"] = np.asarray([f"{i:08d}" for i in range(n)], dtype=str)
    if "extent" in layout.arrays:
        if extents is None:
            extents = np.zeros(layout.arrays["extent"].shape, np.int32)
            extents[..., 2:] = spec.frame  # (height, width)
        arrays["extent"] = extents
    for name in layout.arrays:
        zarr.open_array(str(Path(root) / name), mode="r+").with_config(_DENSE)[...] = arrays[name]
    num_valid = int(np.count_nonzero(valid))
    report = {"num_samples": n, "num_valid": num_valid, "skipped": [], "classes": {}}
    attrs.update(num_valid=num_valid, report=report, complete=True)
    group.attrs.update({ATTR_KEY: attrs})
    return Path(root)


def make_v2_index_store(
    root: str | Path,
    num_samples: int = 100,
    *,
    size: int = 16,
    chunk_samples: int = 4,
    shard_samples: int = 16,
    variants: int = 1,
    holes: Sequence[int] = (),
    flip_pairs: Sequence[Sequence[int]] = ((0, 2),),
) -> Path:
    """A v2 store (image, mask, keypoints, label) whose every field encodes the index."""
    n, k, idx = num_samples, variants, np.arange(num_samples)
    fields = index_fields(flip_pairs)
    image = index_images(n, size, k)
    mask = index_mask(idx, size)
    if k > 1:
        mask = np.repeat(mask[:, None], k, 1)
    points = index_points(idx, size)
    if k > 1:  # spatial fields are stored per variant
        points = np.repeat(points[:, None], k, 1)
    label = (idx % NUM_CLASSES).astype(np.int64)
    holes = list(holes)
    image[holes], mask[holes], points[holes], label[holes] = 0, 255, 0, -1
    valid = np.ones(n, np.uint8)
    valid[holes] = 0
    spec = BuildSpec(
        size=size, chunk_samples=chunk_samples, shard_samples=shard_samples, variants=k
    )
    data = {"image": image, "mask": mask, "keypoints": points, "label": label}
    return write_v2_store(root, fields, data, spec, valid=valid)


def check_index_rows(batch: Mapping[str, Any], size: int = 16) -> None:
    """Assert that every field of an un-augmented batch holds its row's sample (numpy)."""
    index = np.asarray(batch["index"])
    image = np.asarray(batch["image"]).astype(np.int64)
    np.testing.assert_array_equal(image[:, 0, 0, 0] + 256 * image[:, 0, 0, 1], index)
    np.testing.assert_array_equal(batch["label"], index % NUM_CLASSES)
    np.testing.assert_array_equal(batch["mask"], index_mask(index, size))
    np.testing.assert_array_equal(batch["keypoints"], index_points(index, size))
