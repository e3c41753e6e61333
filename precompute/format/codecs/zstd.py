"""The ``zstd`` codec: lossless, for any field, Zarr v3's own ``zstd`` inside the sharding codec.

An inner chunk is stored as ``[bytes(little), zstd(level, checksum false), crc32c]``: its raw
little-endian bytes compressed as one zstd frame (numcodecs' ``Zstd``, the library zarr-python's
``ZstdCodec`` calls, so the bytes are those zarr-python writes), then the crc32c of the frame.
Any Zarr v3 reader with zstd reads the store unchanged. Compression and decompression run in
C with the GIL released (numcodecs' Cython calls), so the loader's reader threads decode in
parallel.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.fields.options import Option, integer
from precompute.format.codecs import CODECS, Codec, register_codec

__all__ = ["ZstdChunks", "content_size"]

DEFAULT_LEVEL = 3  # zstd's own default: about as fast to write as to read, a good ratio


class ZstdChunks(Codec):
    """Lossless zstd of each inner chunk's raw bytes; option ``level`` (1-22, default 3)."""

    name = "zstd"
    args = ("level",)
    options = MappingProxyType({"level": Option(DEFAULT_LEVEL, integer(1, 22))})

    def _zstd(self, opts: Mapping[str, Any]) -> Any:
        from numcodecs.zstd import Zstd

        return Zstd(level=int(opts["level"]), checksum=False)

    def zarr(self, opts: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        """The default ``bytes`` serializer, then zarr's ``ZstdCodec``."""
        from zarr.codecs import ZstdCodec

        return "auto", [ZstdCodec(level=int(opts["level"]), checksum=False)]

    def meta(self, opts: Mapping[str, Any], itemsize: int) -> list[dict[str, Any]]:
        """``bytes`` (little endian for multi-byte values), then ``zstd``."""
        serializer: dict[str, Any] = {"name": "bytes"}
        if itemsize > 1:
            serializer["configuration"] = {"endian": "little"}
        zstd = {"name": "zstd", "configuration": {"level": opts["level"], "checksum": False}}
        return [serializer, zstd]

    def options_of(self, chain: Any, itemsize: int) -> dict[str, Any] | None:
        """``{"level": L}`` of ``[bytes(little), zstd(L, checksum false)]``."""
        names = [c.get("name") for c in chain]
        if names != ["bytes", "zstd"]:
            return None
        endian = (chain[0].get("configuration") or {}).get("endian")
        conf = chain[1].get("configuration") or {}
        if (endian != "little" and itemsize > 1) or conf.get("checksum", False):
            return None
        return {"level": conf.get("level")}

    def encode(self, chunk: np.ndarray, opts: Mapping[str, Any], fill: Any) -> bytes:
        """One zstd frame of the chunk's little-endian bytes."""
        data = np.ascontiguousarray(chunk, chunk.dtype.newbyteorder("<"))
        return bytes(self._zstd(opts).encode(data.view(np.uint8).reshape(-1)))

    def decode_into(self, data: Any, out: np.ndarray, opts: Mapping[str, Any], fill: Any) -> None:
        """Decompress straight into ``out`` (a frame of another size is a ``ValueError``)."""
        flat = out.reshape(-1).view(np.uint8)
        size = content_size(data)
        if size != flat.nbytes:
            raise ValueError(f"zstd: the frame holds {size} bytes, a chunk has {flat.nbytes}")
        try:
            self._zstd(opts).decode(data, out=flat)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"zstd: {exc}") from None


_MAGIC = 0xFD2FB528
_FCS_BYTES = (0, 2, 4, 8)  # by the descriptor's top two bits (0: 1 byte when single-segment)


def content_size(data: Any) -> int | None:
    """The content size a zstd frame header declares (None: not declared, or no frame).

    numcodecs' decompression into a buffer of another size than the frame's content writes
    what the frame holds and says nothing; the loader checks this first.
    """
    head = bytes(memoryview(data)[:18])
    if len(head) < 6 or int.from_bytes(head[:4], "little") != _MAGIC:
        return None
    desc = head[4]
    single = bool(desc & 0x20)
    pos = 5 + (not single) + (0, 1, 2, 4)[desc & 3]
    n = _FCS_BYTES[desc >> 6] or (1 if single else 0)
    if not n or len(head) < pos + n:
        return None
    value = int.from_bytes(head[pos : pos + n], "little")
    return value + 256 if n == 2 else value


if "zstd" not in CODECS:
    register_codec(ZstdChunks())
