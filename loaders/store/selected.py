"""The stores a selection draws from: one store as it sees it, several side by side.

:func:`store_table` is an opened store as the selection layer sees it
(:class:`~loaders.selection.SampleTable`): its per-sample arrays (read at open), keys, the
class counts the build stored (:mod:`precompute.format.classcounts`) and the split recorded
with it (:mod:`precompute.splits.record`), the last three read only when a selection asks.

:func:`mix_stores` lays several stores' chunks one after another in a sample space of chunks of
``C`` samples, ``C`` the largest chunk of the stores: store ``k``'s chunk ``c`` is chunk
``base_k + c``, its slot ``j`` the space's slot ``(base_k + j // c_k) * C + j % c_k`` (the rows
a smaller chunk lacks are holes). The result reads as one :class:`OpenedStore`: the per-sample
arrays side by side, and each streamed array one :class:`MixedStream` that hands every chunk
read to its store's reader, so the batch reader and the order need nothing of their own for a
mixture (``docs/loaders.md``, "Choosing samples").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np
import numpy.typing as npt

from loaders.errors import StoreMetadataError, StoreOpenError
from loaders.selection import SampleTable
from loaders.store.open_store import OpenedStore
from loaders.store.rows import Run
from loaders.store.shardio import ShardedArrayReader
from precompute import errors as pre
from precompute.fields import ClassCounts
from precompute.format.classcounts import read_class_counts
from precompute.splits import RecordedSplits, read_splits

__all__ = ["MixedStore", "MixedStream", "check_same_fields", "mix_stores", "store_table"]


class MixedStream:
    """One streamed array of every store of a mixture, read chunk by chunk by its own reader."""

    def __init__(self, readers: Sequence[ShardedArrayReader], bases: list[int], meta: Any) -> None:
        self.readers, self.meta, self._bases = list(readers), meta, bases
        self.io = readers[0].io
        self.store = getattr(readers[0], "store", None)

    def _local(self, chunk: tuple[int, ...]) -> tuple[ShardedArrayReader, tuple[int, ...]]:
        k = int(np.searchsorted(self._bases, chunk[0], side="right")) - 1
        return self.readers[k], (chunk[0] - self._bases[k], *chunk[1:])

    def read_chunk_runs(self, chunk: tuple[int, ...], runs: Sequence[Run]) -> None:
        """:meth:`ShardedArrayReader.read_chunk_runs` of the store holding ``chunk``."""
        reader, local = self._local(chunk)
        reader.read_chunk_runs(local, runs)

    def read_chunk(self, chunk: Sequence[int]) -> np.ndarray:
        """:meth:`ShardedArrayReader.read_chunk` of the store holding ``chunk``."""
        reader, local = self._local(tuple(int(c) for c in chunk))
        return reader.read_chunk(local)

    @property
    def fetches_ahead(self) -> bool:
        """Whether any store's reader fetches coded chunks ahead (object storage)."""
        return any(r.fetches_ahead for r in self.readers)

    def fetch_ahead(self, chunks: Sequence[tuple[int, ...]], pool: Executor) -> None:
        """:meth:`ShardedArrayReader.fetch_ahead` of each chunk by the store holding it."""
        for chunk in chunks:
            reader, local = self._local(chunk)
            reader.fetch_ahead([local], pool)

    def drop_ahead(self, pool: Executor | None = None) -> None:
        """:meth:`ShardedArrayReader.drop_ahead` of every store's reader."""
        for reader in self.readers:
            reader.drop_ahead(pool)

    def close(self) -> None:
        """Close every store's reader."""
        for reader in self.readers:
            reader.close()


@dataclasses.dataclass(frozen=True)
class MixedStore(OpenedStore):
    """Stores side by side (:func:`mix_stores`).

    ``parts`` are the stores, ``slots`` per store the space's slot of each of its own slots,
    ``bases`` each store's first chunk.
    """

    parts: tuple[OpenedStore, ...] = ()
    slots: tuple[npt.NDArray[np.int64], ...] = ()
    bases: tuple[int, ...] = ()  # each store's first chunk in the space

    def sample_ids(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """``{"index": each sample's slot in its own store, "store": which store}``."""
        cs = self.layout.chunk_samples
        chunk, row = np.divmod(index, cs)
        store = np.searchsorted(self.bases, chunk, side="right") - 1
        own_cs = np.array([p.layout.chunk_samples for p in self.parts], np.int64)[store]
        own = (chunk - np.asarray(self.bases, np.int64)[store]) * own_cs + row
        return {"index": own.astype(np.int64), "store": store.astype(np.int64)}

    def keys(self) -> list[str]:
        """Every slot's source key (``""`` for a hole and the rows a smaller chunk lacks)."""
        out = [""] * self.layout.num_samples
        for part, slots in zip(self.parts, self.slots, strict=True):
            for slot, key in zip(slots.tolist(), part.keys(), strict=True):
                out[slot] = key
        return out

    def close(self) -> None:
        """Close every store."""
        for part in self.parts:
            part.close()


def _describe(source: OpenedStore) -> dict[str, str]:
    size = source.layout.size
    return {
        f.name: f"{f.kind} {f.storage(size).shape} {f.storage(size).dtype}" for f in source.fields
    }


def check_same_fields(sources: Sequence[OpenedStore]) -> None:
    """Refuse stores whose fields (names, kinds, shapes, dtypes), size or variants differ.

    Raises:
        StoreOpenError: Naming the store and every field that differs from the first store's.
    """
    first = _describe(sources[0])
    for other in sources[1:]:
        mine = _describe(other)
        names = sorted(n for n in first.keys() | mine.keys() if first.get(n) != mine.get(n))
        same = (other.layout.size, other.layout.variants) == (
            sources[0].layout.size, sources[0].layout.variants,
        )  # fmt: skip
        if names or not same:
            shown = {n: (first.get(n, "absent"), mine.get(n, "absent")) for n in names}
            raise StoreOpenError(
                str(other.info.path),
                f"a mixture's stores need the same fields, size and variants as the first "
                f"({sources[0].info.path}); fields that differ (first, this): {shown}; size "
                f"{sources[0].layout.size} vs {other.layout.size}, variants "
                f"{sources[0].layout.variants} vs {other.layout.variants}",
            )


def _side_by_side(
    arrays: Sequence[np.ndarray], slots: Sequence[npt.NDArray[np.int64]], total: int
) -> np.ndarray:
    out = np.zeros((total, *arrays[0].shape[1:]), arrays[0].dtype)
    for values, where in zip(arrays, slots, strict=True):
        out[where] = values
    return out


def mix_stores(sources: Sequence[OpenedStore]) -> MixedStore:
    """Lay ``sources`` side by side (module docstring).

    Raises:
        StoreOpenError: The stores' fields differ (:func:`check_same_fields`).
    """
    check_same_fields(sources)
    chunk = max(s.layout.chunk_samples for s in sources)
    counts = [-(-s.layout.num_samples // s.layout.chunk_samples) for s in sources]
    bases = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64).tolist()
    total = int(sum(counts)) * chunk
    slots = []
    for s, base in zip(sources, bases, strict=True):
        j = np.arange(s.layout.num_samples, dtype=np.int64)
        cs = s.layout.chunk_samples
        slots.append((base + j // cs) * chunk + j % cs)
    first = sources[0]
    layout = dataclasses.replace(
        first.layout, num_samples=total, chunk_samples=chunk, shard_samples=chunk
    )
    hashes = "+".join(s.info.spec_hash for s in sources)
    info = dataclasses.replace(first.info, layout=layout, spec_hash=hashes)
    streams = {}
    for name, reader in first.streams.items():
        meta = dataclasses.replace(
            reader.meta, shape=(total, *reader.meta.shape[1:]),
            chunk_shape=(chunk, *reader.meta.chunk_shape[1:]),
        )  # fmt: skip
        streams[name] = MixedStream([s.streams[name] for s in sources], bases, meta)
    small = {n: _side_by_side([s.small[n] for s in sources], slots, total) for n in first.small}
    return MixedStore(
        info,
        streams,  # type: ignore[arg-type]
        small,
        _side_by_side([s.extents for s in sources], slots, total),
        _side_by_side([s.valid for s in sources], slots, total),
        first.variant_axis,
        tuple(sources),
        tuple(slots),
        tuple(bases),
    )


def store_table(source: OpenedStore) -> SampleTable:
    """The :class:`SampleTable` of ``source``."""
    path, n = source.info.path, source.layout.num_samples

    def counts(name: str, classes: int | None) -> ClassCounts | None:
        try:
            return read_class_counts(path, name, n, classes)
        except pre.StoreMetadataError as exc:
            raise StoreMetadataError(str(path), str(exc)) from None

    def recorded() -> RecordedSplits | None:
        try:
            return read_splits(path, n)
        except pre.StoreMetadataError as exc:
            raise StoreMetadataError(str(path), str(exc)) from None

    return SampleTable(
        str(path), n, source.layout.chunk_samples, source.valid, source.fields,
        source.small, source.keys, counts, recorded,
    )  # fmt: skip
