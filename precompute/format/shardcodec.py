"""The one shard codec of the store: the bytes of a ``[bytes, crc32c]`` shard file, both ways.

Encoding and decoding are written here once, for the writer, the checks and every reader
(local files, object storage): :data:`CRC_BYTES` and :data:`MISSING`, :func:`index_nbytes`,
:func:`encode_index` / :func:`decode_index` (the index with its crc32c), :func:`chunk_sound`
(an inner chunk's bytes against their crc32c), and :func:`encode_raw_shard`, which lays out one
shard's bytes in memory as zarr-python would (:func:`write_raw_shard` writes them to a file).

The arrays :mod:`precompute.pipeline.writer` creates are sharded along the sample axis only, with
inner chunks of raw little-endian bytes + crc32c and the index (``N x (offset u64, nbytes
u64)`` little endian + crc32c) at the end of the file (``docs/FORMAT.md``). For those,
:func:`encode_raw_shard` lays the shard out itself: the chunks in order from offset 0, a chunk
past the end of the array marked missing (``2^64 - 1`` twice), a partial last chunk padded with
the fill value, which is byte for byte the file zarr-python writes (a test compares them). A
coded array (:mod:`precompute.format.codecs`) has each inner chunk encoded by its codec before
its crc32c, the bytes zarr-python's codec pipeline writes, at their own sizes in the index. It
costs one crc32c pass and one sha256 pass over the shard's bytes, in place of zarr-python's
per-chunk codec pipeline; the parts go to the store in one write (a ``writev`` locally, one
PUT to an object store), and the marker's sha256 needs no second read.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

__all__ = [
    "CRC_BYTES",
    "MISSING",
    "chunk_sound",
    "decode_index",
    "encode_index",
    "encode_raw_shard",
    "index_nbytes",
    "raw_writable",
    "write_raw_shard",
]

CRC_BYTES = 4  # bytes of a crc32c (after every inner chunk, and after the shard index)
MISSING = 2**64 - 1  # offset and nbytes, in a shard index, of a chunk never written


def index_nbytes(chunks: int) -> int:
    """Bytes of the index of a shard of ``chunks`` inner chunks: ``(offset, nbytes)`` + crc32c."""
    return chunks * 16 + CRC_BYTES


def _crc(data: bytes | memoryview) -> bytes:
    return int(crc32c.crc32c(data)).to_bytes(CRC_BYTES, "little")


def encode_index(index: np.ndarray) -> list[bytes]:
    """The bytes at a shard's end: ``index`` (``(..., 2)`` offsets and sizes) and its crc32c."""
    table = np.ascontiguousarray(index, dtype="<u8").tobytes()
    return [table, _crc(table)]


def decode_index(raw: bytes | memoryview, chunks_per_shard: tuple[int, ...]) -> np.ndarray:
    """The ``(*chunks_per_shard, 2)`` index read from a shard's last :func:`index_nbytes`.

    Raises:
        ValueError: ``raw`` has another size, or fails its crc32c.
    """
    raw = memoryview(raw)
    if len(raw) != index_nbytes(math.prod(chunks_per_shard)) or not chunk_sound(raw):
        raise ValueError("shard index crc32c checksum mismatch")
    return np.frombuffer(raw[:-CRC_BYTES], "<u8").reshape(*chunks_per_shard, 2)


def chunk_sound(data: bytes | memoryview) -> bool:
    """Whether ``data`` is bytes followed by their crc32c (an inner chunk, or an index)."""
    view = memoryview(data)
    return len(view) >= CRC_BYTES and int(crc32c.crc32c(view[:-CRC_BYTES])) == int.from_bytes(
        view[-CRC_BYTES:], "little"
    )


def raw_writable(
    shape: tuple[int, ...], shard: tuple[int, ...], chunk: tuple[int, ...], dtype: str
) -> bool:
    """Whether :func:`write_raw_shard` applies: split along axis 0 only, a fixed-size dtype."""
    if dtype == "string" or not shape or len(shard) != len(shape) or len(chunk) != len(shape):
        return False
    return (
        tuple(shard[1:]) == tuple(shape[1:]) == tuple(chunk[1:])
        and shard[0] % chunk[0] == 0
        and np.dtype(dtype).kind in "biuf"
    )


def _chunk_bytes(block: np.ndarray) -> memoryview:
    return np.ascontiguousarray(block).data.cast("B")


def encode_raw_shard(
    values: Any,
    *,
    shape: tuple[int, ...],
    shard_shape: tuple[int, ...],
    chunk_shape: tuple[int, ...],
    dtype: str,
    fill: Any,
    shard: int,
    where: str = "shard",
    codec: Any = None,
) -> tuple[list[memoryview | bytes], dict[str, Any]]:
    """Encode shard ``shard`` (rows ``values``) of an array: its bytes, in parts, and digest.

    Args:
        values: The shard's rows, ``(rows, *shape[1:])``, cast to ``dtype``: a narrowing
            cast into an integer array only where every value survives it.
        shape: The array's shape.
        shard_shape: Its shard shape (:func:`raw_writable` holds for the three).
        chunk_shape: Its inner chunk shape.
        dtype: The array's numpy dtype name.
        fill: The fill value of padding rows.
        shard: The shard index along axis 0.
        where: The shard's file or object, for messages.
        codec: The array's chunk codec (a :class:`~precompute.format.codecs.CodecSpec`), or
            None: raw chunks.

    Returns:
        The file's bytes as parts in order (views of ``values`` where no cast or padding was
        needed), and ``{"size": bytes, "sha256": hex digest}`` of them (as
        :func:`precompute.format.storecheck.file_digest` would read the file back).

    Raises:
        ValueError: ``values`` has the wrong shape, or a value ``dtype`` cannot hold exactly.
    """
    target = np.dtype(dtype).newbyteorder("<")
    given = np.asarray(values)
    start = shard * shard_shape[0]
    rows = min(shard_shape[0], shape[0] - start)
    if rows <= 0 or given.shape != (rows, *shape[1:]):
        raise ValueError(f"{where}: values of shape {given.shape}, shard {shard} has {rows} rows")
    arr = _cast(where, given, target)
    cs = chunk_shape[0]
    per_shard = shard_shape[0] // cs
    index = np.full((per_shard, 2), MISSING, dtype="<u8")
    parts: list[memoryview | bytes] = []
    offset = 0
    for j in range(math.ceil(rows / cs)):
        block = arr[j * cs : (j + 1) * cs]
        if len(block) < cs:  # the array's last chunk: zarr stores it whole, padded
            padded = np.full((cs, *shape[1:]), fill, dtype=target)
            padded[: len(block)] = block
            block = padded
        data: memoryview | bytes = (
            _chunk_bytes(block) if codec is None else codec.codec.encode(block, codec.options, fill)
        )
        parts += [data, _crc(data)]
        nbytes = len(memoryview(data).cast("B"))
        index[j] = (offset, nbytes + CRC_BYTES)
        offset += nbytes + CRC_BYTES
    table, table_crc = encode_index(index)
    parts += [table, table_crc]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return parts, {"size": offset + len(table) + CRC_BYTES, "sha256": digest.hexdigest()}


def write_raw_shard(path: Path, values: Any, **geometry: Any) -> dict[str, Any]:
    """Write shard ``shard`` of the array at ``path`` as one file; return its digest.

    ``geometry``: the keyword arguments of :func:`encode_raw_shard`. The file is written whole
    by the local store (``<name>.<uuid>.partial``, then renamed).

    Raises:
        ValueError: As :func:`encode_raw_shard`.
    """
    from precompute.storage.local import LocalStore

    parts, digest = encode_raw_shard(values, where=str(path), **geometry)
    LocalStore().put(str(path), parts)
    return digest


def _cast(path: str, values: np.ndarray, target: np.dtype) -> np.ndarray:
    """``values`` as ``target``: safe casts and float to float as numpy casts, others exactly.

    A float stored in a narrower float is rounded (what such a field means); any other cast
    that is not safe (float or a wider integer into an integer array) only goes through if
    every value survives it.

    Raises:
        ValueError: A value the cast would change (a fraction, or a number out of range, into
            an integer array): zarr-python would have stored it changed, without a word.
    """
    floats = values.dtype.kind == target.kind == "f"
    if floats or np.can_cast(values.dtype, target, "safe"):
        return values.astype(target, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        cast = values.astype(target)
        exact = np.array_equal(cast, values)
    if not exact:
        raise ValueError(f"{path}: {values.dtype} values that {target.name} cannot hold exactly")
    return cast
