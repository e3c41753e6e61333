"""BufferPool: reuse only what nobody holds any more."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from loaders.transfer.buffers import BufferPool


def test_buffer_is_reused_only_when_released() -> None:
    pool = BufferPool((2, 3), np.uint8, rows=4, keep=2)
    a = pool.take(4)
    a[:] = 7
    tensor = torch.from_numpy(a[1:3])  # a view of a view, held by a tensor
    del a
    b = pool.take(4)
    assert pool.allocated == 2
    assert (tensor == 7).all()  # the first buffer was not handed out again
    del b, tensor
    c = pool.take(3)
    assert pool.allocated == 2 and c.shape == (3, 2, 3)


def test_pool_bound_and_bad_rows() -> None:
    pool = BufferPool((1,), np.int64, rows=2, keep=1)
    held = [pool.take(2) for _ in range(3)]  # over the bound: extra buffers are not kept
    assert pool.allocated == 3 and len({h.ctypes.data for h in held}) == 3
    del held
    pool.take(1)
    assert pool.allocated == 3
    with pytest.raises(ValueError, match="rows must be"):
        pool.take(3)


def test_a_numpy_sub_view_keeps_its_buffer_out_of_rotation() -> None:
    pool = BufferPool((4,), np.uint8, rows=2, keep=4)
    a = pool.take(2)
    a[:] = 3
    sub = a[1:][:, 1:]  # a view of a view
    del a
    b = pool.take(2)
    b[:] = 9
    assert (sub == 3).all() and pool.allocated == 2


@pytest.mark.gpu
def test_pinned_buffers_are_page_locked_and_reused_the_same_way() -> None:
    pool = BufferPool((2, 3), np.uint8, rows=4, keep=2, pin=True)
    a = pool.take(4)
    assert torch.from_numpy(a).is_pinned() and torch.from_numpy(a[1:]).is_pinned()
    where = a.ctypes.data
    held = torch.from_numpy(a[2:])
    del a
    assert pool.take(4).ctypes.data != where  # still held: not handed out again
    del held
    assert pool.take(4).ctypes.data == where


@pytest.mark.gpu
def test_cuda_loader_reads_into_pinned_buffers_and_serves_every_sample(tmp_path) -> None:
    from loaders import StoreLoader
    from tests.contracts.loader_contract import decode_index, make_index_store

    store = make_index_store(tmp_path / "s", 96)
    loader = StoreLoader(store, 8, device="cuda", drop_last=False)
    assert loader._buffers and all(pool.pin for pool in loader._buffers.values())
    for _ in range(2):  # twice: slots and pool buffers are reused in the second epoch
        seen = []
        for batch in loader:
            image = batch["image"].cpu().numpy()
            np.testing.assert_array_equal(decode_index(image), batch["index"].cpu().numpy())
            seen.extend(batch["index"].tolist())
        assert sorted(seen) == list(range(96))


def test_pageable_buffers_start_on_a_page_boundary() -> None:
    # 48 MiB: over glibc's largest mmap threshold, so np.empty would start 16 bytes past a page
    pool = BufferPool((512, 512, 3), np.uint8, rows=64, keep=2)
    a, b = pool.take(64), pool.take(64)
    assert a.ctypes.data % 4096 == 0 and b.ctypes.data % 4096 == 0
    assert all(row.ctypes.data % 64 == 0 for row in a)
    a[:] = 1
    assert int(a.sum()) == a.size and a.flags.writeable and torch.from_numpy(a).is_contiguous()


@pytest.mark.parametrize("io", ["pread", "mmap"])
def test_loader_rows_are_aligned_and_byte_identical_to_the_stored_samples(tmp_path, io) -> None:
    from loaders import StoreLoader
    from precompute.pipeline.writer import write_store_from_arrays
    from precompute.spec import BuildSpec

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (96, 32, 32, 3), dtype=np.uint8)
    spec = BuildSpec(size=32, chunk_samples=8, shard_samples=32)
    write_store_from_arrays(tmp_path / "s", images, np.arange(96) % 5, spec)
    loader = StoreLoader(tmp_path / "s", 16, device="cpu", seed=3, io=io, drop_last=False)
    seen = []
    for _ in range(2):  # the second epoch reads into reused buffers
        for batch in loader:
            image, index = batch["image"].numpy(), batch["index"].numpy()
            assert image.ctypes.data % 4096 == 0
            np.testing.assert_array_equal(image, images[index])
            seen.extend(index.tolist())
    assert sorted(seen) == sorted(list(range(96)) * 2)


def test_a_forked_child_writing_a_pooled_buffer_leaves_the_parents_alone() -> None:
    import os

    pool = BufferPool((4096,), np.uint8, rows=4, keep=2)
    mine = pool.take(4)
    mine[:] = 1
    pid = os.fork()
    if pid == 0:  # the child: write its copy, then leave without running any cleanup
        mine[:] = 9
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(mine.max()) == 1
