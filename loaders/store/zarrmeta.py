"""Parse a Zarr v3 array's ``zarr.json`` and decide whether the raw-bytes fast path applies.

The fast path understands exactly: one ``sharding_indexed`` codec with the index at the end,
inner codecs ``[bytes(little), crc32c]`` (raw), or a nostall chunk codec before the crc32c
(``[bytes, zstd, crc32c]``, ``[nostall.jpeg, crc32c]``: :mod:`precompute.format.codecs`,
decoded by the reader), index codecs ``[bytes(little), crc32c]``, a regular chunk grid, the
default chunk key encoding and a fixed-size numeric dtype. Anything else is read through
zarr-python.
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

_NUMERIC = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
}


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
        fast: True when the fast path applies (raw bytes, or a known chunk codec).
        reason: Why the fast path does not apply (empty when it does).
        codec: The chunk codec of the inner chunks (a
            :class:`~precompute.format.codecs.CodecSpec`); None: raw bytes.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    shard_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    separator: str
    fast: bool
    reason: str = ""
    codec: Any = None

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


def _bad(where: str, reason: str) -> UnsupportedArrayError:
    """Return the error for array ``where`` (one line, a long value shortened)."""
    return UnsupportedArrayError(f"{where}: {reason}"[:300])


def _map(value: Any) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping, else an empty one (a wrong type reads as absent)."""
    return value if isinstance(value, Mapping) else {}


def _codecs(value: Any) -> list[Mapping[str, Any]]:
    return [_map(c) for c in value] if isinstance(value, list) else []


def _is_bytes(codec: Mapping[str, Any], itemsize: int) -> bool:
    if codec.get("name") != "bytes":
        return False
    endian = _map(codec.get("configuration")).get("endian")
    return endian == "little" or (endian is None and itemsize == 1)


def _is_crc(codec: Mapping[str, Any]) -> bool:
    return codec.get("name") == "crc32c"


def _inner_codec(doc: Mapping[str, Any], itemsize: int) -> Any:
    """The chunk codec of a sharded array's inner codecs before their crc32c, or None."""
    from precompute.format.codecs import codec_from_meta

    codecs = _codecs(doc.get("codecs"))
    inner = _codecs(_map(codecs[0].get("configuration")).get("codecs")) if codecs else []
    if len(inner) < 2 or not _is_crc(inner[-1]):
        return None
    return codec_from_meta(inner[:-1], itemsize)


def _fast_path_problem(doc: Mapping[str, Any], dtype: np.dtype, coded: bool = False) -> str:
    """Return why ``doc`` is not readable by the fast path, or '' when it is."""
    if doc.get("storage_transformers"):
        return "storage transformers are not supported"
    codecs = _codecs(doc.get("codecs"))
    if len(codecs) != 1 or codecs[0].get("name") != "sharding_indexed":
        return f"codecs {[c.get('name') for c in codecs]} are not a single sharding_indexed"
    conf = _map(codecs[0].get("configuration"))
    inner, index = _codecs(conf.get("codecs")), _codecs(conf.get("index_codecs"))
    if conf.get("index_location", "end") != "end":
        return "shard index is not at the end"
    raw = len(inner) == 2 and _is_bytes(inner[0], dtype.itemsize) and _is_crc(inner[1])
    if not (raw or coded):
        return f"inner codecs {[c.get('name') for c in inner]} are not [bytes(little), crc32c]"
    if len(index) != 2 or not (_is_bytes(index[0], 8) and _is_crc(index[1])):
        return f"index codecs {[c.get('name') for c in index]} are not [bytes(little), crc32c]"
    return ""


def _dims(where: str, key: str, value: Any, ndim: int | None, least: int) -> tuple[int, ...]:
    """Return ``value`` as a shape: a list of ``ndim`` integers >= ``least``."""
    ok = (
        isinstance(value, list)
        and (ndim is None or len(value) == ndim)
        and all(
            isinstance(v, int) and not isinstance(v, bool) and least <= v < 2**62 for v in value
        )
    )
    if not ok:
        want = f"{ndim if ndim is not None else 'a list of'} integers >= {least}"
        raise _bad(where, f"key '{key}' must be {want}, got {value!r}")
    return tuple(value)


def parse_array_meta(doc: Mapping[str, Any], where: str = "array") -> ArrayMeta:
    """Parse a Zarr v3 array ``zarr.json`` document.

    Any document gives an :class:`ArrayMeta` or this error, naming ``where`` and the key.

    Raises:
        UnsupportedArrayError: Not a Zarr v3 array with a regular chunk grid and numeric dtype,
            or a key of a wrong type or value (a shape that is not a list of integers, chunks
            that do not divide their shard).
    """
    if (
        not isinstance(doc, Mapping)
        or doc.get("zarr_format") != 3
        or doc.get("node_type") != "array"
    ):
        raise UnsupportedArrayError(f"{where}: not a Zarr v3 array")
    grid = _map(doc.get("chunk_grid"))
    if grid.get("name") != "regular":
        raise _bad(where, f"chunk grid {grid.get('name')!r} is not regular")
    if not isinstance(doc.get("data_type"), str) or doc["data_type"] not in _NUMERIC:
        raise _bad(where, f"data type {doc.get('data_type')!r} not supported")
    dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    shape = _dims(where, "shape", doc.get("shape"), None, 0)
    shard_shape = _dims(
        where,
        "chunk_grid.configuration.chunk_shape",
        _map(grid.get("configuration")).get("chunk_shape"),
        len(shape),
        1,
    )
    codecs = _codecs(doc.get("codecs"))
    sharded = len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed"
    chunk_shape = (
        _dims(
            where,
            "codecs.0.configuration.chunk_shape",
            _map(codecs[0].get("configuration")).get("chunk_shape"),
            len(shape),
            1,
        )
        if sharded
        else shard_shape
    )
    if any(s % c for s, c in zip(shard_shape, chunk_shape, strict=True)):
        raise _bad(where, f"inner chunks {chunk_shape} do not divide the shard shape {shard_shape}")
    key = _map(doc.get("chunk_key_encoding"))
    sep = _map(key.get("configuration")).get("separator", "/")
    if sep not in ("/", "."):
        raise _bad(where, f"chunk key separator {sep!r} is not '/' or '.'")
    codec = _inner_codec(doc, dtype.itemsize) if sharded else None
    problem = _fast_path_problem(doc, dtype, codec is not None)
    if not problem and key.get("name") != "default":
        problem = f"chunk key encoding {key.get('name')!r} is not 'default'"
    try:
        fill = dtype.type(doc.get("fill_value", 0))
    except (TypeError, ValueError, OverflowError) as exc:
        raise _bad(where, f"fill value {doc.get('fill_value')!r}") from exc
    if np.ndim(fill) != 0:
        raise _bad(where, f"fill value {doc.get('fill_value')!r} is not a scalar")
    return ArrayMeta(shape, dtype, fill, shard_shape, chunk_shape, sep, not problem, problem, codec)
