"""The arrays of a store and their geometry: one table for the writer, the checks and readers.

:func:`store_arrays` lists every Zarr array of a store of ``layout`` with its shape, shard
shape, inner chunk shape, dtype and hole value. A v1 layout (no fields) gives v1's four arrays
(``image``, ``label``, ``extent``, ``key``); a v2 layout gives one array per field (shape and
dtype from its kind's :meth:`~precompute.fields.Kind.storage`), each kind's companions
(``FIELD.WHAT``), ``extent`` when a field is spatial, ``valid`` and ``key``
(``docs/FORMAT.md``, "Format v2").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from precompute.checks import size_hw
from precompute.fields import FieldSpec, Storage, v1_fields
from precompute.format.codecs import CodecSpec, array_codecs

if TYPE_CHECKING:
    from precompute.format.layout import StoreLayout

__all__ = ["ArraySpec", "sample_nbytes", "store_arrays"]

HOLE_LABEL = -1  # v1's label of a skipped slot (the same constant as precompute.format.layout's)


@dataclass(frozen=True)
class ArraySpec:
    """One array of a store.

    Attributes:
        name: The array's name (its folder in the store).
        shape: ``(N, *per_sample)``, or ``(N, K, *per_sample)`` for a spatial field (and
            ``extent``) when the store has K > 1 variants.
        shard: Shard shape (whole samples, every variant).
        chunk: Inner chunk shape (``chunk_samples`` samples, one variant); ``()`` for ``key``
            (one plain chunk per shard, no sharding).
        dtype: Zarr data type name (``uint8``, ``int64``, ``float32``, ``string``, ...).
        fill: The value of a hole (and the array's Zarr fill value).
        codec: The chunk codec of the array's inner chunks (None: raw, ``[bytes, crc32c]``).
    """

    name: str
    shape: tuple[int, ...]
    shard: tuple[int, ...]
    chunk: tuple[int, ...]
    dtype: str
    fill: int | float | str
    codec: CodecSpec | None = None

    @property
    def sharded(self) -> bool:
        """Stored with ``sharding_indexed`` (one file per shard, fixed size)."""
        return bool(self.chunk)

    @property
    def itemsize(self) -> int:
        """Bytes per element (0 for ``string``)."""
        return 0 if self.dtype == "string" else np.dtype(self.dtype).itemsize

    @property
    def sample_nbytes(self) -> int:
        """One sample's bytes decoded (every variant): its shape x itemsize, no padding."""
        return sample_nbytes(self.shape[1:], self.itemsize)


def sample_nbytes(shape: tuple[int, ...], itemsize: int) -> int:
    """The decoded (raw) bytes of one sample of ``shape``: what a codec's ratio is taken over."""
    return int(np.prod(shape, dtype=np.int64)) * itemsize


def _array(layout: StoreLayout, name: str, st: Storage, per_variant: bool) -> tuple[str, ArraySpec]:
    n, sh, ch, k = (
        layout.num_samples,
        layout.shard_samples,
        layout.chunk_samples,
        layout.variants,
    )
    if per_variant and k > 1:
        spec = ArraySpec(
            name, (n, k, *st.shape), (sh, k, *st.shape), (ch, 1, *st.shape), st.dtype, st.fill
        )
    else:
        spec = ArraySpec(name, (n, *st.shape), (sh, *st.shape), (ch, *st.shape), st.dtype, st.fill)
    return name, spec


def _key(layout: StoreLayout) -> tuple[str, ArraySpec]:
    return "key", ArraySpec("key", (layout.num_samples,), (layout.shard_samples,), (), "string", "")


def store_arrays(
    layout: StoreLayout,
    fields: tuple[FieldSpec, ...] = (),
    codecs: Mapping[str, CodecSpec] | None = None,
) -> Mapping[str, ArraySpec]:
    """Every array of a store of ``layout``, by name, in writing order.

    Args:
        layout: The store's layout.
        fields: The store's fields (v2); empty for a v1 store.
        codecs: The chunk codec of each coded field (the others are raw).

    Raises:
        SpecError: A codec for no field, or one the field's kind or storage refuses.
    """
    arrays = _arrays(layout, fields)
    if not codecs:
        return arrays
    named = fields or v1_fields()
    shapes = {f.name: (arrays[f.name].shape[1:], arrays[f.name].dtype) for f in named}
    coded = array_codecs(codecs, named, shapes)
    return {k: replace(a, codec=coded.get(k)) for k, a in arrays.items()}


def _arrays(layout: StoreLayout, fields: tuple[FieldSpec, ...]) -> dict[str, ArraySpec]:
    """The raw arrays of a store of ``layout`` (:func:`store_arrays` without codecs)."""
    extent = Storage((4,), "int32", 0)
    if not fields:  # v1
        return dict(
            [
                _array(layout, "image", Storage((*size_hw(layout.size), 3), "uint8", 0), True),
                _array(layout, "label", Storage((), "int64", HOLE_LABEL), False),
                _array(layout, "extent", extent, True),
                _key(layout),
            ]
        )
    out: list[tuple[str, ArraySpec]] = []
    for f in fields:
        out.append(_array(layout, f.name, f.storage(layout.size), f.spatial))
        for what, st in f.spec.companions(f.options, layout.size).items():
            out.append(_array(layout, f"{f.name}.{what}", st, f.spatial))
    if any(f.spatial for f in fields):
        out.append(_array(layout, "extent", extent, True))
    out.append(_array(layout, "valid", Storage((), "uint8", 0), False))
    out.append(_key(layout))
    return dict(out)
