import itertools

import numpy as np
import pytest

from loaders.order import (
    chunk_plan,
    epoch_order,
    num_batches,
    samples_per_rank,
    variant_for_epoch,
)


@pytest.mark.parametrize("n", [1, 31, 32, 100, 257])
def test_single_rank_epoch_is_a_permutation(n):
    for epoch in range(3):
        order = epoch_order(n, 8, seed=5, epoch=epoch)
        assert sorted(order.tolist()) == list(range(n))


def test_epochs_differ_and_seed_repeats():
    a0 = epoch_order(500, 16, seed=1, epoch=0)
    a1 = epoch_order(500, 16, seed=1, epoch=1)
    b0 = epoch_order(500, 16, seed=1, epoch=0)
    c0 = epoch_order(500, 16, seed=2, epoch=0)
    assert not np.array_equal(a0, a1)
    assert np.array_equal(a0, b0)
    assert not np.array_equal(a0, c0)


@pytest.mark.parametrize(("n", "world"), [(100, 2), (101, 3), (257, 4), (64, 8)])
def test_ranks_disjoint_and_equal_length(n, world):
    orders = [epoch_order(n, 8, seed=0, epoch=2, rank=r, world_size=world) for r in range(world)]
    lengths = {len(o) for o in orders}
    assert len(lengths) == 1
    flat = np.concatenate(orders)
    assert len(np.unique(flat)) == len(flat)
    # independently: each rank holds the samples of its dealt chunks; the smallest rank wins
    held = [sum(min(8, n - 8 * int(c)) for c in chunk_plan(n, 8, seed=0, epoch=2, rank=r,
                                                          world_size=world))
            for r in range(world)]
    assert len(orders[0]) == min(held)


def test_ranks_read_whole_chunks():
    order = epoch_order(160, 16, seed=0, epoch=0, rank=1, world_size=2)
    chunks = set((order // 16).tolist())
    assert chunks == set(chunk_plan(160, 16, seed=0, epoch=0, rank=1, world_size=2).tolist())


def test_holes_are_left_out():
    valid = np.ones(90, bool)
    valid[[0, 17, 45, 89]] = False
    order = epoch_order(90, 8, seed=0, epoch=0, valid=valid)
    assert sorted(order.tolist()) == np.flatnonzero(valid).tolist()


def test_buffer_window_mixes_only_within_window():
    order = epoch_order(256, 8, seed=0, epoch=0, buffer_chunks=4)
    plan = chunk_plan(256, 8, seed=0, epoch=0)
    first_window = set(np.concatenate([np.arange(c * 8, c * 8 + 8) for c in plan[:4]]).tolist())
    assert set(order[:32].tolist()) == first_window


def test_no_shuffle_is_identity():
    assert epoch_order(50, 8, seed=9, epoch=4, shuffle=False).tolist() == list(range(50))


def test_variant_cycle_serves_each_variant_once_per_block():
    seq = [variant_for_epoch(0, e, 4) for e in range(12)]
    for block in range(3):
        assert sorted(seq[block * 4:(block + 1) * 4]) == [0, 1, 2, 3]
    assert variant_for_epoch(0, 7, 1) == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="rank"):
        epoch_order(10, 2, seed=0, epoch=0, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        num_batches(10, 0, True)
    with pytest.raises(ValueError, match=">= 0"):
        epoch_order(10, 2, seed=-1, epoch=0)
    assert num_batches(10, 3, True) == 3
    assert num_batches(10, 3, False) == 4


def test_more_ranks_than_chunks_is_an_error_not_an_empty_epoch():
    with pytest.raises(ValueError, match="8 ranks share 4 chunks"):
        epoch_order(100, 32, seed=1, epoch=0, rank=0, world_size=8)


def test_uneven_partial_chunk_sets_the_common_length():
    orders = [epoch_order(250, 32, seed=1, epoch=0, rank=r, world_size=3) for r in range(3)]
    counts = [samples_per_rank(250, 32, seed=1, epoch=0, world_size=3)] * 3
    assert [len(o) for o in orders] == counts
    assert len(np.unique(np.concatenate(orders))) == sum(counts)


@pytest.mark.parametrize(("n", "batch", "buffer_chunks"), [(257, 10, 3), (256, 64, 8), (100, 7, 1)])
def test_batch_sorting_keeps_every_batch_and_window_and_sorts_inside(n, batch, buffer_chunks):
    kw = dict(seed=3, epoch=2, rank=1, world_size=2, buffer_chunks=buffer_chunks)
    valid = np.arange(n) % 11 != 0  # holes shift the window boundaries off the batch grid
    plain = epoch_order(n, 8, valid=valid, **kw)
    batched = epoch_order(n, 8, valid=valid, batch_size=batch, **kw)
    assert len(batched) == len(plain)
    chunks = chunk_plan(n, 8, seed=3, epoch=2, rank=1, world_size=2)
    counts = [int(valid[c * 8:(c + 1) * 8].sum()) for c in chunks]
    starts = np.cumsum([0] + [sum(counts[i:i + buffer_chunks])
                              for i in range(0, len(chunks), buffer_chunks)])
    cuts = sorted({0, len(plain), *range(0, len(plain), batch),
                   *(int(s) for s in starts if s < len(plain))})
    for lo, hi in itertools.pairwise(cuts):  # every (batch, window) segment: same set, sorted
        assert sorted(plain[lo:hi].tolist()) == batched[lo:hi].tolist()
    assert not np.array_equal(plain, batched)
    for lo in range(0, len(plain), batch):  # each batch holds exactly its samples
        assert set(plain[lo:lo + batch].tolist()) == set(batched[lo:lo + batch].tolist())


def test_batch_sorting_leaves_store_order_alone():
    assert epoch_order(50, 8, seed=9, epoch=4, shuffle=False, batch_size=6).tolist() == list(
        range(50))
    with pytest.raises(ValueError, match="batch_size"):
        epoch_order(50, 8, seed=0, epoch=0, batch_size=0)
