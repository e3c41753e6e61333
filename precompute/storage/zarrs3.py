"""A read-only Zarr v3 store over ``s3://`` (boto3), so zarr-python reads object-store arrays.

zarr-python reaches ``s3://`` through fsspec's ``s3fs``, which nostall does not depend on; this
store uses the same boto3 client as the rest of :mod:`precompute.storage.objstore` (ranged GETs for
partial reads: a shard's index and its inner chunks).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from precompute.storage import objstore

__all__ = ["S3Store", "open_array"]


def _span(byte_range: ByteRequest | None) -> tuple[int | None, int | None]:
    """Return ``(start, length)`` for :func:`objstore.get_range` (offsets: see ``_get``)."""
    if byte_range is None:
        return None, None
    if isinstance(byte_range, RangeByteRequest):
        return byte_range.start, byte_range.end - byte_range.start
    if isinstance(byte_range, SuffixByteRequest):
        return None, byte_range.suffix
    raise TypeError(f"unsupported byte range {byte_range!r}")


class S3Store(Store):
    """Read-only store rooted at ``s3://bucket/prefix``.

    Args:
        url: The root URL.
    """

    supports_writes = False
    supports_deletes = False
    supports_partial_writes = False
    supports_listing = True

    def __init__(self, url: str) -> None:
        super().__init__(read_only=True)
        objstore.split_url(url)  # a StoreError now for a malformed URL
        self.url = url.rstrip("/")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3Store) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def _get(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        url = f"{self.url}/{key}"
        try:
            if isinstance(byte_range, OffsetByteRequest):
                size = objstore.head(url)[0]
                length = size - byte_range.offset
                return objstore.get_range(url, byte_range.offset, length).data if length else b""
            start, span = _span(byte_range)
            if span == 0:
                return b""
            return objstore.get_range(url, start, span).data
        except FileNotFoundError:
            return None

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """GET ``key`` (or a range of it); None if it does not exist."""
        data = await asyncio.to_thread(self._get, key, byte_range)
        if data is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """GET several ranges concurrently."""
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        """Whether ``key`` exists (a HEAD)."""
        return await asyncio.to_thread(objstore.store_path(f"{self.url}/{key}").exists)

    async def set(self, key: str, value: Buffer) -> None:
        """Not supported: the store is read-only."""
        raise NotImplementedError("S3Store is read-only")

    async def delete(self, key: str) -> None:
        """Not supported: the store is read-only."""
        raise NotImplementedError("S3Store is read-only")

    async def list(self) -> AsyncIterator[str]:
        """Every key under the root."""
        async for key in self.list_prefix(""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key under the root that starts with ``prefix``."""
        sizes = await asyncio.to_thread(objstore.list_sizes, self.url)
        for url in sizes:
            key = url[len(self.url) + 1 :]
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The names directly under ``prefix``."""
        prefix = prefix.rstrip("/")
        seen = set()
        async for key in self.list_prefix(f"{prefix}/" if prefix else ""):
            name = key[len(prefix) + 1 if prefix else 0 :].split("/", 1)[0]
            if name not in seen:
                seen.add(name)
                yield name


def open_array(path: str | Path) -> Any:
    """Open the zarr array at ``path`` read-only: a local folder or an ``s3://`` URL."""
    import zarr

    text = str(path)
    if not objstore.is_object_url(text):
        return zarr.open_array(text, mode="r")
    root, _, name = text.rstrip("/").rpartition("/")
    return zarr.open_array(store=S3Store(root), path=name, mode="r")
