"""``io="ram"``: every streamed array of a store read once into one contiguous block of rows.

With rows back to back in memory, a batch is one gather (``ndarray.take`` of the batch's
sample rows) per streamed array, as from a numpy memmap, instead of one copy per (chunk,
batch) run (:mod:`loaders.batching.reader`). That per-run work is what holds the chunked
read below a memmap when rows are small (a 9 x 9 x 100 float32 patch is 32 KB: a batch of 64
touches about as many chunks as it holds rows). The price: the store's streamed bytes are
copied once into this process's private memory (RSS grows with the dataset, bounded by the
budget; every rank of a job holds its own copy, where mapped shard files share the page
cache). Each chunk is read whole through its reader (crc32c checked, a complete store's
missing or cut shard refused) at load time.
"""

from __future__ import annotations

import numpy as np

from loaders.errors import LoaderError
from loaders.store.open_store import OpenedStore
from loaders.transfer.buffers import page_aligned

__all__ = ["load_rows"]


def load_rows(source: OpenedStore, budget: int) -> dict[str, np.ndarray]:
    """Read every streamed array of ``source`` whole: ``{name: (rows, row bytes) uint8}``.

    Row ``i`` holds sample ``i`` (the last chunk's padding rows follow the last sample).

    Raises:
        LoaderError: A store with variants (a chunk holds one variant of its samples), or
            streamed arrays larger than ``budget`` bytes (the message gives both).
        CorruptChunkError: A chunk fails its crc32c check, or a shard file is missing or cut.
    """
    metas = {name: reader.meta for name, reader in source.streams.items()}
    for name, meta in metas.items():
        if tuple(meta.chunk_shape[1:]) != tuple(meta.shape[1:]):
            raise LoaderError(
                f"io='ram' reads stores without variants: {name} has chunks of "
                f"{list(meta.chunk_shape)} in an array of {list(meta.shape)}; use io='mmap'"
            )
    sizes = {n: m.grid_shape[0] * m.chunk_nbytes for n, m in metas.items()}
    if sum(sizes.values()) > budget:
        raise LoaderError(
            f"io='ram' needs {sum(sizes.values())} bytes for the streamed arrays "
            f"{sorted(sizes)}, over map_bytes={budget}; raise map_bytes or use io='auto'"
        )
    rows: dict[str, np.ndarray] = {}
    for name, reader in source.streams.items():
        meta = metas[name]
        per_chunk = meta.chunk_shape[0]
        row_bytes = meta.chunk_nbytes // per_chunk
        shape = (meta.grid_shape[0] * per_chunk, row_bytes)
        block = page_aligned(shape, np.dtype(np.uint8), huge=True)
        tail = (0,) * (len(meta.shape) - 1)
        for chunk in range(meta.grid_shape[0]):
            part = block[chunk * per_chunk : (chunk + 1) * per_chunk]
            reader.read_chunk_into((chunk, *tail), [part])
        rows[name] = block
    return rows
