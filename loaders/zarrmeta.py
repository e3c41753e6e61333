"""Parse a Zarr v3 array's ``zarr.json`` and decide whether the raw-bytes fast path applies.

The fast path understands exactly: one ``sharding_indexed`` codec with the index at the end,
inner codecs ``[bytes(little), crc32c]``, index codecs ``[bytes(little), crc32c]``, a regular
chunk grid, the default chunk key encoding and a fixed-size numeric dtype. Anything else is
read through zarr-python.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from loaders.errors import UnsupportedArrayError

__all__ = ["ArrayMeta", "parse_array_meta"]

_NUMERIC = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64"}


@dataclass(frozen=True)
class ArrayMeta:
    """What a reader needs from an array's ``zarr.json``.

    Attributes:
        shape: Array shape.
        dtype: Numpy dtype of the decoded chunk (little endian on the fast path).
        fill_value: Value of never-written elements.
        shard_shape: Shape of one shard (the outer chunk grid).
        chunk_shape: Shape of one inner chunk (the read unit).
        separator: Chunk key separator (``/`` or ``.``).
        fast: True when the raw-bytes fast path applies.
        reason: Why the fast path does not apply (empty when it does).
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    shard_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    separator: str
    fast: bool
    reason: str = ""

    @cached_property
    def chunks_per_shard(self) -> tuple[int, ...]:
        """Inner chunks per shard along each axis."""
        return tuple(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))

    @cached_property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of inner chunks along each axis of the whole array."""
        return tuple(math.ceil(n / c) for n, c in zip(self.shape, self.chunk_shape, strict=True))

    @cached_property
    def chunk_nbytes(self) -> int:
        """Bytes of one decoded inner chunk (without its crc32c)."""
        return math.prod(self.chunk_shape) * self.dtype.itemsize


def _is_bytes(codec: Mapping[str, Any], itemsize: int) -> bool:
    if codec.get("name") != "bytes":
        return False
    endian = (codec.get("configuration") or {}).get("endian")
    return endian == "little" or (endian is None and itemsize == 1)


def _is_crc(codec: Mapping[str, Any]) -> bool:
    return codec.get("name") == "crc32c"


def _fast_path_problem(doc: Mapping[str, Any], dtype: np.dtype) -> str:
    """Return why ``doc`` is not readable by the fast path, or '' when it is."""
    if doc.get("storage_transformers"):
        return "storage transformers are not supported"
    codecs = doc.get("codecs", [])
    if len(codecs) != 1 or codecs[0].get("name") != "sharding_indexed":
        return f"codecs {[c.get('name') for c in codecs]} are not a single sharding_indexed"
    conf = codecs[0].get("configuration", {})
    inner, index = conf.get("codecs", []), conf.get("index_codecs", [])
    if conf.get("index_location", "end") != "end":
        return "shard index is not at the end"
    if len(inner) != 2 or not (_is_bytes(inner[0], dtype.itemsize) and _is_crc(inner[1])):
        return f"inner codecs {[c.get('name') for c in inner]} are not [bytes(little), crc32c]"
    if len(index) != 2 or not (_is_bytes(index[0], 8) and _is_crc(index[1])):
        return f"index codecs {[c.get('name') for c in index]} are not [bytes(little), crc32c]"
    return ""


def parse_array_meta(doc: Mapping[str, Any], where: str = "array") -> ArrayMeta:
    """Parse a Zarr v3 array ``zarr.json`` document.

    Raises:
        UnsupportedArrayError: Not a Zarr v3 array with a regular chunk grid and numeric dtype.
    """
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "array":
        raise UnsupportedArrayError(f"{where}: not a Zarr v3 array")
    grid = doc.get("chunk_grid", {})
    if grid.get("name") != "regular":
        raise UnsupportedArrayError(f"{where}: chunk grid {grid.get('name')!r} is not regular")
    if doc.get("data_type") not in _NUMERIC:
        raise UnsupportedArrayError(f"{where}: data type {doc.get('data_type')!r} not supported")
    dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    shape = tuple(int(n) for n in doc["shape"])
    shard_shape = tuple(int(n) for n in grid["configuration"]["chunk_shape"])
    codecs = doc.get("codecs", [])
    sharded = len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed"
    chunk_shape = (tuple(int(n) for n in codecs[0]["configuration"]["chunk_shape"])
                   if sharded else shard_shape)
    key = doc.get("chunk_key_encoding", {})
    sep = (key.get("configuration") or {}).get("separator", "/")
    problem = _fast_path_problem(doc, dtype)
    if not problem and key.get("name") != "default":
        problem = f"chunk key encoding {key.get('name')!r} is not 'default'"
    try:
        fill = dtype.type(doc.get("fill_value", 0))
    except (TypeError, ValueError) as exc:
        raise UnsupportedArrayError(f"{where}: fill value {doc.get('fill_value')!r}") from exc
    return ArrayMeta(shape, dtype, fill, shard_shape, chunk_shape, sep, not problem, problem)


