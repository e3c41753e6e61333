"""The iterator nodes and the epoch plan, one at a time."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loaders.batching.nodes import Node
from loaders.batching.order import epoch_order
from loaders.batching.plan import epoch_plan
from loaders.batching.prefetch import Prefetcher
from loaders.batching.reader import BatchReader
from loaders.errors import CorruptChunkError, WorkerError
from loaders.store.open_store import open_store
from tests.contracts.loader_contract import decode_index, make_index_store


class Counter(Node[int]):
    """Yields 0..n-1; raises ``fail`` at item ``fail_at``; records the producing thread."""

    def __init__(self, n: int, fail_at: int = -1, fail: Exception | None = None) -> None:
        self.n, self.fail_at, self.fail, self.i = n, fail_at, fail, 0
        self.threads: set[str] = set()

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        self.i = int((state or {}).get("i", 0))

    def next(self) -> int:
        self.threads.add(threading.current_thread().name)
        if self.i == self.fail_at and self.fail is not None:
            raise self.fail
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def get_state(self) -> dict[str, Any]:
        return {"i": self.i}


def test_prefetch_state_is_what_the_consumer_got() -> None:
    source = Counter(20)
    node = Prefetcher(source, depth=4, name="nostall-test")
    node.reset()
    assert [node.next() for _ in range(5)] == [0, 1, 2, 3, 4]
    state = node.get_state()
    assert state == {"i": 5}  # although the thread may have run ahead
    assert source.threads == {"nostall-test"}
    node.reset(state)
    assert list(node) == list(range(5, 20))
    node.close()


def test_prefetch_reraises_on_the_consumer_thread() -> None:
    node = Prefetcher(Counter(10, fail_at=3, fail=KeyError("boom")), depth=2)
    got = []
    with pytest.raises(WorkerError, match="boom") as info:
        for item in node:
            got.append(item)
    assert got == [0, 1, 2]
    assert isinstance(info.value.__cause__, KeyError)
    node.close()


def test_prefetch_passes_loader_errors_unchanged() -> None:
    err = CorruptChunkError("image", "/s/image/c/4/0/0/0", (9, 0, 0, 0), "crc32c checksum mismatch")
    node = Prefetcher(Counter(10, fail_at=0, fail=err), depth=1)
    with pytest.raises(CorruptChunkError) as info:
        node.next()
    assert info.value is err and "image/c/4/0/0/0" in str(err)
    node.close()


def test_prefetch_close_stops_a_blocked_producer() -> None:
    node = Prefetcher(Counter(10_000), depth=1, name="nostall-blocked")
    node.next()
    node.close()
    assert not [t for t in threading.enumerate() if t.name == "nostall-blocked"]


@pytest.mark.parametrize("world_size, buffer_chunks", [(1, 1), (1, 3), (3, 2), (4, 8)])
def test_plan_windows_cover_the_order(world_size: int, buffer_chunks: int) -> None:
    valid = np.ones(103, bool)
    valid[[0, 1, 2, 3, 50, 77]] = False  # chunk 0 is all holes
    for rank in range(world_size):
        kw = {
            "seed": 1,
            "epoch": 4,
            "rank": rank,
            "world_size": world_size,
            "shuffle": True,
            "buffer_chunks": buffer_chunks,
            "valid": valid,
        }
        plan = epoch_plan(103, 4, **kw)
        np.testing.assert_array_equal(plan.order, epoch_order(103, 4, **kw))
        pos = 0
        for w in plan.windows:
            assert w.start == pos and w.stop > w.start
            assert set(plan.order[w.start : w.stop] // 4) <= set(w.chunks.tolist())
            pos = w.stop
        assert pos == len(plan.order)
        assert plan.window_at(pos) == len(plan.windows)


def test_reader_and_batcher_resume_at_any_batch(tmp_path: Path) -> None:
    source = open_store(make_index_store(tmp_path / "s", 70, holes=(10, 11)))
    plan = epoch_plan(
        70,
        4,
        seed=0,
        epoch=1,
        rank=0,
        world_size=1,
        shuffle=True,
        buffer_chunks=3,
        valid=source.valid,
    )

    def batcher() -> BatchReader:
        return BatchReader(source, plan, 6, False, num_threads=1)

    whole = batcher()
    whole.reset()
    batches = list(whole)
    assert len(batches) == plan.batches(6, False) == 12
    for b in batches:
        np.testing.assert_array_equal(decode_index(b["image"]), b["index"])
    np.testing.assert_array_equal(np.concatenate([b["index"] for b in batches]), plan.order)
    for start in (1, 5, 11, 12):
        node = batcher()
        node.reset({"batch": start})
        rest = list(node)
        assert len(rest) == 12 - start
        for got, want in zip(rest, batches[start:], strict=True):
            np.testing.assert_array_equal(got["image"], want["image"])


@pytest.mark.parametrize("io", ["pread", "mmap"])
def test_reader_blocks_and_gathers_of_any_size_serve_the_same_batches(
    tmp_path: Path, io: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows grouped a few at a time and per-sample arrays gathered for a few batches at a
    time (block edges inside and between batches, a resume mid-block) serve exactly the
    batches of one block for the whole epoch."""
    source = open_store(make_index_store(tmp_path / "s", 70, holes=(10, 11)), io=io)
    plan = epoch_plan(
        70, 4, seed=0, epoch=1, rank=2, world_size=3, shuffle=True, buffer_chunks=2,
        valid=source.valid, batch_size=5, pad=True,
    )  # fmt: skip

    def served(start: int) -> list[dict[str, np.ndarray]]:
        node = BatchReader(source, plan, 5, False, num_threads=2)
        node.reset({"batch": start})
        return [{k: v.copy() for k, v in b.items()} for b in node]

    whole = served(0)
    assert len(whole) == plan.batches(5, False) and whole[-1]["is_pad"].any()
    for block, gather in ((1, 1), (7, 2), (9, 3)):
        monkeypatch.setattr("loaders.batching.reader.BLOCK_POSITIONS", block)
        monkeypatch.setattr("loaders.batching.reader.GATHER_BATCHES", gather)
        for start in (0, 2, 3):
            for got, want in zip(served(start), whole[start:], strict=True):
                assert got.keys() == want.keys()
                for key in want:
                    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
                np.testing.assert_array_equal(decode_index(got["image"]), got["index"])
