"""The ``jpeg`` codec: lossy, for image fields; one baseline JPEG per sample in each chunk.

An inner chunk of ``(n, ..., H, W, C)`` uint8 samples (C = 1 or 3) is stored as
``[nostall.jpeg, crc32c]``: the ``nostall.jpeg`` array-to-bytes codec writes

- ``count``: u32 little endian, the number of images in the chunk (every axis before
  ``(H, W, C)`` flattened in C order: ``n``, or ``n * K`` with a variant axis);
- ``count`` u32 little endian lengths, one per image, in that order;
- the images' JPEG streams, concatenated in that order.

Each stream is a complete baseline JFIF file (SOF0, sequential, 8-bit, Huffman tables
optimised per image: still baseline), YCbCr with the chosen chroma subsampling (``420``,
``422`` or ``444``; grey for C = 1), with a restart marker every ``restart_rows`` MCU rows
(0: none), as GPU hardware decoders take them. A length of 0 stands for an image whose every
value is the array's fill value (holes, padding, black frames): nothing is encoded, and it
decodes to exactly the fill value. Encoding is Pillow's (libjpeg-turbo); decoding is
libjpeg-turbo's through simplejpeg, straight into the caller's rows with the GIL released.
The same libjpeg-turbo build gives the same bytes.

zarr-python reads a store of it with this codec registered: nostall installs it under the
``zarr.codecs`` entry point ``nostall.jpeg`` (:class:`JpegCodec`), and importing this module
registers it too. Without nostall, the layout above is all a reader needs (``docs/FORMAT.md``).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.errors import SpecError
from precompute.fields.options import Option, integer
from precompute.format.codecs import CODECS, Codec, register_codec

__all__ = ["JpegChunks", "JpegCodec", "split_streams"]

ZARR_NAME = "nostall.jpeg"
SUBSAMPLING = {"420": "4:2:0", "422": "4:2:2", "444": "4:4:4"}
MAX_SIDE = 65500  # JPEG's limit on a side
INSTALL = "pip install 'nostall[jpeg]' (simplejpeg: libjpeg-turbo)"


def _subsampling(where: str, value: Any) -> str:
    text = str(value).replace(":", "")
    if isinstance(value, bool) or text not in SUBSAMPLING:
        raise SpecError(f"{where} must be one of {sorted(SUBSAMPLING)}, got {value!r}")
    return text


def _planes(shape: Sequence[int]) -> tuple[int, tuple[int, int, int]]:
    """``(count, (H, W, C))`` of a chunk of ``shape`` (``(..., H, W, C)``)."""
    h, w, c = shape[-3:]
    return int(np.prod(shape[:-3], dtype=np.int64)), (h, w, c)


def split_streams(data: Any, count: int) -> list[memoryview]:
    """The ``count`` JPEG streams of a chunk's stored bytes (empty views for fill images).

    Raises:
        ValueError: The header or lengths disagree with ``count`` or the bytes' size.
    """
    view = memoryview(data).cast("B")
    head = 4 + 4 * count
    if len(view) < head or int.from_bytes(view[:4], "little") != count:
        raise ValueError(f"jpeg: chunk header does not hold {count} images")
    sizes = np.frombuffer(view[4:head], "<u4").astype(np.int64)
    ends = head + np.cumsum(sizes)
    if count and int(ends[-1]) != len(view):
        raise ValueError(
            f"jpeg: lengths add up to {int(ends[-1])} bytes, the chunk has {len(view)}"
        )
    starts = np.concatenate(([head], ends[:-1])).tolist()
    return [view[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]


def _decoder() -> Any:
    try:
        import simplejpeg
    except ImportError as exc:
        raise ImportError(f"the jpeg codec decodes with simplejpeg: {INSTALL}") from exc
    return simplejpeg


def decode_image(stream: Any, out: np.ndarray, fill: Any) -> None:
    """Decode one stream into ``out`` (``(H, W, C)`` uint8, C-contiguous); empty: ``fill``.

    Raises:
        ValueError: The stream does not decode to an image of ``out``'s shape.
    """
    if not len(stream):
        out[...] = fill
        return
    c = out.shape[-1]
    try:
        got = _decoder().decode_jpeg(stream, "RGB" if c == 3 else "GRAY", buffer=out)
    except ValueError as exc:
        raise ValueError(f"jpeg: {exc}") from None
    if got.shape != out.shape:
        raise ValueError(f"jpeg: an image of {got.shape}, the array holds {out.shape}")


class JpegChunks(Codec):
    """Baseline JPEG of each image; options ``quality``, ``subsampling``, ``restart_rows``."""

    name = "jpeg"
    lossy = True
    args = ("quality", "subsampling")
    package = INSTALL
    options = MappingProxyType(
        {
            "quality": Option(90, integer(1, 100)),
            "subsampling": Option("420", _subsampling),
            "restart_rows": Option(1, integer(0, 255)),
        }
    )

    def refuses(self, dtype: str, shape: tuple[int, ...]) -> str | None:
        """Anything but ``(H, W, 1 or 3)`` uint8 samples of sides up to 65500."""
        if dtype != "uint8":
            return f"JPEG stores uint8 values, the field's are {dtype}"
        if len(shape) < 3 or shape[-1] not in (1, 3) or max(shape[-3:-1]) > MAX_SIDE:
            return f"JPEG stores (H, W, 1 or 3) images, the field's samples are {shape}"
        return None

    def zarr(self, opts: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        """:class:`JpegCodec` as the serializer, no compressor."""
        return JpegCodec(**opts), []

    def meta(self, opts: Mapping[str, Any], itemsize: int) -> list[dict[str, Any]]:
        """``nostall.jpeg`` and its configuration."""
        return [JpegCodec(**opts).to_dict()]

    def options_of(self, chain: Any, itemsize: int) -> dict[str, Any] | None:
        """The configuration of ``[nostall.jpeg]``."""
        if len(chain) != 1 or chain[0].get("name") != ZARR_NAME:
            return None
        return dict(chain[0].get("configuration") or {})

    def encode(self, chunk: np.ndarray, opts: Mapping[str, Any], fill: Any) -> bytes:
        """The chunk's header, lengths and streams (an all-fill image has no stream)."""
        from PIL import Image

        count, (h, w, c) = _planes(chunk.shape)
        streams = []
        for plane in np.ascontiguousarray(chunk).reshape(count, h, w, c):
            if np.all(plane == fill):
                streams.append(b"")
                continue
            out = io.BytesIO()
            img = Image.fromarray(plane if c == 3 else plane[..., 0], "RGB" if c == 3 else "L")
            img.save(
                out,
                "JPEG",
                quality=int(opts["quality"]),
                subsampling=SUBSAMPLING[opts["subsampling"]],
                optimize=True,
                progressive=False,
                restart_marker_rows=int(opts["restart_rows"]),
            )
            streams.append(out.getvalue())
        head = struct.pack(f"<{count + 1}I", count, *map(len, streams))
        return head + b"".join(streams)

    def decode_into(self, data: Any, out: np.ndarray, opts: Mapping[str, Any], fill: Any) -> None:
        """Decode every image of the chunk into ``out`` (C-contiguous, the chunk's shape)."""
        count, plane = _planes(out.shape)
        for stream, dest in zip(
            split_streams(data, count), out.reshape(count, *plane), strict=True
        ):
            decode_image(stream, dest, fill)

    def decode_rows(
        self,
        data: Any,
        rows: Sequence[np.ndarray | None],
        chunk: np.ndarray,
        opts: Mapping[str, Any],
        fill: Any,
    ) -> None:
        """Decode only the asked rows, each straight into its destination."""
        count, plane = _planes(chunk.shape)
        streams = split_streams(data, count)
        per_row = count // len(rows)
        for i, row in enumerate(rows):
            if row is None:
                continue
            dests = row.reshape(per_row, *plane)
            for k in range(per_row):
                decode_image(streams[i * per_row + k], dests[k], fill)


def _zarr_base() -> Any:
    from zarr.abc.codec import ArrayBytesCodec

    return ArrayBytesCodec


@dataclass(frozen=True)
class JpegCodec(_zarr_base()):  # type: ignore[misc]
    """The ``nostall.jpeg`` Zarr v3 array-to-bytes codec (the layout: this module's doc)."""

    is_fixed_size = False
    quality: int = 90
    subsampling: str = "420"
    restart_rows: int = 1

    def __init__(self, *, quality: int = 90, subsampling: str = "420", restart_rows: int = 1):
        opts = JpegChunks().normalize(
            ZARR_NAME,
            {"quality": quality, "subsampling": subsampling, "restart_rows": restart_rows},
        )
        for key, value in opts.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JpegCodec:
        """Parse ``{"name": "nostall.jpeg", "configuration": {...}}``."""
        from zarr.core.common import parse_named_configuration

        _, conf = parse_named_configuration(data, ZARR_NAME)
        return cls(**dict(conf or {}))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The codec's JSON."""
        conf = {k: getattr(self, k) for k in ("quality", "subsampling", "restart_rows")}
        return {"name": ZARR_NAME, "configuration": conf}

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        """Refuse what JPEG cannot store (not uint8, not ``(..., H, W, 1 or 3)``)."""
        name = str(dtype.to_native_dtype()) if hasattr(dtype, "to_native_dtype") else str(dtype)
        why = JpegChunks().refuses(name, tuple(shape))
        if why:
            raise ValueError(f"{ZARR_NAME}: {why}")

    @property
    def _opts(self) -> dict[str, Any]:
        return self.to_dict()["configuration"]  # type: ignore[no-any-return]

    async def _decode_single(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        out = np.empty(chunk_spec.shape, np.uint8)
        JpegChunks().decode_into(
            chunk_bytes.as_numpy_array(), out, self._opts, chunk_spec.fill_value
        )
        return chunk_spec.prototype.nd_buffer.from_numpy_array(out)

    async def _encode_single(self, chunk_array: Any, chunk_spec: Any) -> Any:
        data = JpegChunks().encode(
            np.asarray(chunk_array.as_numpy_array(), np.uint8), self._opts, chunk_spec.fill_value
        )
        return chunk_spec.prototype.buffer.from_bytes(data)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: Any) -> int:
        """Not known before encoding."""
        raise NotImplementedError


def _register() -> None:
    from zarr.registry import register_codec as zarr_register

    zarr_register(ZARR_NAME, JpegCodec)  # again is harmless: registered by qualified name
    if "jpeg" not in CODECS:
        register_codec(JpegChunks())


_register()
