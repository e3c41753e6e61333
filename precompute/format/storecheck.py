"""What a complete store must hold on disk, checked without trusting Zarr's fill values.

Zarr reads a missing chunk or shard file as its fill value. In a complete nostall store every
shard file of every array exists (the writer writes empty chunks too), so a missing file is
corruption, never zeros. Three checks, each naming the file:

- :func:`check_array_meta`: an array's ``zarr.json`` says what the layout says (shape, data
  type, shard and chunk shapes, the inner codecs: ``[bytes, crc32c]``, or the array's chunk
  codec before the crc32c, :mod:`precompute.format.codecs`).
- :func:`shard_file_problems`: every shard file exists, and a raw sharded array's file has the
  exact size its index and fixed-size chunks give (a cut or a shard of another size is
  caught); a coded array's chunks have no fixed size, so its file is checked by its index.
- :func:`file_digest`: size and sha256 of a whole file, recorded per shard in the shard markers
  at build time; ``precompute verify`` compares them (a whole shard swapped for another one is
  self-consistent chunk by chunk, so only this catches it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precompute.format.metajson import metadata_error, read_json
from precompute.format.shardcodec import CRC_BYTES, MISSING, index_nbytes
from precompute.storage.location import Location, location

if TYPE_CHECKING:
    from precompute.format.layout import StoreLayout

__all__ = [
    "CRC_BYTES",
    "MISSING",
    "SHARDED",
    "ArrayBytes",
    "array_bytes",
    "array_geometry",
    "check_array_meta",
    "expected_shard_size",
    "file_digest",
    "shard_file",
    "shard_file_problems",
    "sharded_file_size",
    "sharded_names",
    "store_sizes",
]

SHARDED = ("image", "label", "extent")  # v1's arrays with sharding_indexed: one file per shard


def sharded_names(layout: StoreLayout) -> tuple[str, ...]:
    """The arrays of ``layout`` stored with ``sharding_indexed`` (one fixed-size file per shard)."""
    return tuple(name for name, a in layout.arrays.items() if a.sharded)


def array_geometry(layout: StoreLayout, name: str) -> tuple[tuple[int, ...], ...]:
    """Return ``(shape, shard shape, inner chunk shape)`` of array ``name`` (``key``: no inner)."""
    a = layout.arrays[name]
    return a.shape, a.shard, a.chunk


def shard_file(root: Any, layout: StoreLayout, name: str, shard: int) -> Any:
    """Return the path of shard ``shard`` of array ``name`` (default chunk key encoding).

    A :class:`~pathlib.Path` under a path, a :class:`Location` under a location.
    """
    out = root / name / "c" / str(shard)
    for _ in range(len(array_geometry(layout, name)[0]) - 1):
        out = out / "0"
    return out


def expected_shard_size(layout: StoreLayout, name: str, shard: int) -> int | None:
    """Return the exact byte size of a complete shard file (None: ``key``, variable length).

    A shard file holds every inner chunk inside the array (raw bytes + crc32c each), then the
    index: 16 bytes per inner chunk of the whole shard grid, + crc32c.
    """
    a = layout.arrays[name]
    if not a.sharded or a.codec is not None:  # coded chunks: sizes known from the index only
        return None
    coords = (shard,) + (0,) * (len(a.shape) - 1)
    return sharded_file_size(a.shape, a.shard, a.chunk, a.itemsize, coords)


def sharded_file_size(
    shape: tuple[int, ...],
    shard_shape: tuple[int, ...],
    chunk_shape: tuple[int, ...],
    itemsize: int,
    coords: tuple[int, ...],
) -> int:
    """Return the byte size of shard ``coords`` of a complete ``[bytes, crc32c]`` sharded array.

    Complete: every inner chunk inside the array is written; the index sits at the end.
    """
    written = 1
    for n, s, c, i in zip(shape, shard_shape, chunk_shape, coords, strict=True):
        written *= math.ceil((min((i + 1) * s, n) - i * s) / c)
    index = index_nbytes(math.prod(s // c for s, c in zip(shard_shape, chunk_shape, strict=True)))
    return written * (math.prod(chunk_shape) * itemsize + CRC_BYTES) + index


def shard_file_problems(
    root: Path | Location,
    layout: StoreLayout,
    shard: int,
    names: tuple[str, ...] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Iterator[str]:
    """Yield one line per shard file of ``shard`` that is missing or has the wrong size.

    ``sizes``: every file's size by path (:func:`store_sizes`, one listing); default a
    ``stat`` (a HEAD in object storage) per file. ``names``: default every array.
    """
    for name in layout.arrays if names is None else names:
        path = shard_file(root, layout, name, shard)
        try:
            size = location(path).size() if sizes is None else sizes[str(path)]
        except (FileNotFoundError, KeyError):
            yield (
                f"shard {shard}: {name}: shard file is missing ({path}; a complete store "
                "has every shard)"
            )
            continue
        want = expected_shard_size(layout, name, shard)
        if want is not None and size != want:
            yield (
                f"shard {shard}: {name}: shard file {path} has {size} bytes, a complete "
                f"shard has {want} (cut, or replaced by another file)"
            )


@dataclass(frozen=True)
class ArrayBytes:
    """One array's bytes per sample: as stored, and decoded (raw).

    Attributes:
        name: The array.
        codec: Its chunk codec (``jpeg:90:420``), or ``raw``.
        stored: Its files (chunks, crc32c, shard index) over the samples they hold; None:
            nothing written yet.
        raw: One sample decoded: its shape x itemsize (:attr:`ArraySpec.sample_nbytes`), never
            the padding of a last chunk that the samples do not fill.
    """

    name: str
    codec: str
    stored: float | None
    raw: int

    @property
    def ratio(self) -> float | None:
        """``raw / stored``: how many times smaller than decoded it is stored (None: unknown)."""
        return self.raw / self.stored if self.stored else None

    def to_dict(self) -> dict[str, Any]:
        """``{"codec", "stored_bytes_per_sample", "raw_bytes_per_sample", "ratio"}``."""
        return {"codec": self.codec, "stored_bytes_per_sample": self.stored,
                "raw_bytes_per_sample": self.raw, "ratio": self.ratio}  # fmt: skip


def array_bytes(
    root: Path | Location,
    layout: StoreLayout,
    names: Sequence[str],
    samples: int | None = None,
    sizes: Mapping[str, int] | None = None,
) -> list[ArrayBytes]:
    """The bytes per sample of arrays ``names``: the one figure inspect and benchmarks show.

    Args:
        root: The store.
        layout: Its layout.
        names: The arrays.
        samples: The samples its files hold (default: every slot; an incomplete store: the
            slots of its written shards; 0: nothing written, ``stored`` None).
        sizes: Every file's size by path (:func:`store_sizes`; default: one listing).

    Raises:
        OSError: The listing failed.
    """
    n = layout.num_samples if samples is None else samples
    if n and sizes is None:
        sizes = store_sizes(root)
    out = []
    for name in names:
        a = layout.arrays[name]
        prefix = f"{root / name / 'c'}/"
        stored = sum(v for k, v in (sizes or {}).items() if k.startswith(prefix)) / n if n else None
        codec = "raw" if a.codec is None else str(a.codec)
        out.append(ArrayBytes(name, codec, stored, a.sample_nbytes))
    return out


def store_sizes(root: Path | Location) -> dict[str, int]:
    """Every file's (object's) size under ``root`` by path or URL: one listing.

    Raises:
        OSError: The listing failed.
    """
    where = location(root)
    return {where.store.url(key): meta.size for key, meta in where.list().items()}


def _get(meta: Any, doc: Mapping[str, Any], key: str) -> Any:
    """Return ``doc[k1][k2]...`` for dotted ``key``, or raise naming the first missing level."""
    value: Any = doc
    for depth, part in enumerate(key.split(".")):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            where = ".".join(key.split(".")[: depth + 1])
            raise metadata_error(meta, where, f"is missing (reading '{key}')")
    return value


def _expect(meta: Any, doc: Mapping[str, Any], key: str, want: Any) -> None:
    got = _get(meta, doc, key)
    if json.dumps(got) != json.dumps(want):  # strict: 16.0 or true is not 16 or 1
        raise metadata_error(meta, key, f"is {got!r}, the store layout says {want!r}")


def _expect_codecs(
    meta: Any, codecs: Any, key: str, want: list[dict[str, Any]] | None = None
) -> None:
    """``codecs`` are ``[bytes(little), crc32c]``, or ``want`` (a chunk codec's) + crc32c."""
    ok = isinstance(codecs, list) and all(isinstance(c, Mapping) for c in codecs)
    names = [c.get("name") for c in codecs] if ok else codecs
    if want is not None:
        chain = [*want, {"name": "crc32c"}]
        if json.dumps(codecs, sort_keys=True) != json.dumps(chain, sort_keys=True):
            raise metadata_error(meta, key, f"codecs {codecs!r} are not the store's {chain!r}")
        return
    if names != ["bytes", "crc32c"]:
        raise metadata_error(meta, key, f"codecs {names!r} are not ['bytes', 'crc32c']")
    conf = codecs[0].get("configuration", {})
    if not isinstance(conf, Mapping) or conf.get("endian", "little") != "little":
        raise metadata_error(meta, f"{key}.0.configuration", f"is {conf!r}, not little endian")


def check_array_meta(root: Path | Location, layout: StoreLayout, name: str) -> Mapping[str, Any]:
    """Check that array ``name``'s ``zarr.json`` matches ``layout``; return the document.

    Raises:
        StoreMetadataError: The file does not parse, or a key is missing or differs (the
            message names the file and the key).
    """
    meta = root / name / "zarr.json"
    doc = read_json(meta)
    shape, shard_shape, chunk_shape = array_geometry(layout, name)
    _expect(meta, doc, "zarr_format", 3)
    _expect(meta, doc, "node_type", "array")
    _expect(meta, doc, "shape", list(shape))
    _expect(meta, doc, "data_type", layout.arrays[name].dtype)
    _expect(meta, doc, "chunk_grid.name", "regular")
    _expect(meta, doc, "chunk_grid.configuration.chunk_shape", list(shard_shape))
    _expect(meta, doc, "chunk_key_encoding.name", "default")
    sep = _get(meta, doc, "chunk_key_encoding").get("configuration", {})  # a Mapping by now
    if not isinstance(sep, Mapping) or sep.get("separator", "/") != "/":
        raise metadata_error(meta, "chunk_key_encoding.configuration", f"is {sep!r}, want '/'")
    if layout.arrays[name].sharded:
        _expect(meta, doc, "codecs.0.name", "sharding_indexed")
        conf = "codecs.0.configuration"
        if len(_get(meta, doc, "codecs")) != 1:
            raise metadata_error(meta, "codecs", "must hold only the sharding_indexed codec")
        _expect(meta, doc, f"{conf}.chunk_shape", list(chunk_shape))
        _expect(meta, doc, f"{conf}.index_location", "end")
        a = layout.arrays[name]
        want = None if a.codec is None else a.codec.codec.meta(a.codec.options, a.itemsize)
        _expect_codecs(meta, _get(meta, doc, f"{conf}.codecs"), f"{conf}.codecs", want)
        _expect_codecs(meta, _get(meta, doc, f"{conf}.index_codecs"), f"{conf}.index_codecs")
    return doc


def file_digest(path: Path | Location, block: int = 64 << 20) -> dict[str, Any]:
    """Return ``{"size": bytes, "sha256": hex digest}`` of the whole file ``path``.

    Read in blocks of ``block`` bytes (one read or GET each). Not a crc32c: a file made of
    blocks that each end with their own crc32c (every shard file) has the same whole-file
    crc32c whatever the blocks hold.
    """
    where = location(path)
    digest, size, total = hashlib.sha256(), 0, None
    while total is None or size < total:
        got = where.store.get(where.key, size, block)
        total = got.size
        if not len(got.data):
            break
        digest.update(got.data)
        size += len(got.data)
    return {"size": size, "sha256": digest.hexdigest()}
