import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.batching.order import (
    epoch_after,
    epoch_order,
    epoch_sequence,
    num_batches,
    rank_windows,
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
    assert {len(o) for o in orders} == {n // world}  # the remainder: fewer than world samples
    flat = np.concatenate(orders)
    assert len(np.unique(flat)) == len(flat)


@pytest.mark.parametrize(
    ("n", "world"), [(600, 4), (600, 2), (1600, 3), (1600, 4), (1600, 8), (5, 8), (101, 3)]
)
@pytest.mark.parametrize("shuffle", [False, True])
def test_padded_ranks_cover_every_sample_exactly_once(n, world, shuffle):
    # chunks of 32: dropping whole chunks used to leave 512 of 600 (4 ranks), 576 (2 ranks)
    # and 1,536 of 1,600 (3, 4, 8 ranks) samples for evaluation
    kw = dict(seed=1, epoch=3, world_size=world, shuffle=shuffle, buffer_chunks=2, pad=True)
    plans = [rank_windows(n, 32, rank=r, **kw) for r in range(world)]
    orders = [epoch_order(n, 32, rank=r, batch_size=7, **kw) for r in range(world)]
    share = -(-n // world)
    assert {len(o) for o in orders} == {share}
    real = np.concatenate([o[:k] for o, (_, k) in zip(orders, plans, strict=True)])
    repeats = np.concatenate([o[k:] for o, (_, k) in zip(orders, plans, strict=True)])
    assert sorted(real.tolist()) == list(range(n))
    assert len(repeats) == world * share - n < world
    for o in orders:
        assert len(np.unique(o)) == len(o)  # repeats come from other ranks' samples


def test_training_epoch_drops_less_than_a_batch_per_rank():
    # 180 samples in chunks of 32 over 4 ranks used to serve 128 (whole chunks dropped)
    orders = [
        epoch_order(180, 32, seed=0, epoch=0, rank=r, world_size=4, batch_size=8) for r in range(4)
    ]
    served = sum(num_batches(len(o), 8, drop_last=True) * 8 for o in orders)
    assert served == 160 and 180 - served < 4 * 8


def test_ranks_share_at_most_their_boundary_chunks():
    orders = [epoch_order(1000, 16, seed=0, epoch=0, rank=r, world_size=4) for r in range(4)]
    chunks = [set((o // 16).tolist()) for o in orders]
    for a, b in itertools.combinations(range(4), 2):
        assert len(chunks[a] & chunks[b]) <= (1 if b == a + 1 else 0)
    assert sum(map(len, chunks)) <= -(-1000 // 16) + 3


def test_windows_list_the_chunks_they_serve():
    windows, real = rank_windows(
        300, 8, seed=2, epoch=1, rank=1, world_size=3, buffer_chunks=4, pad=True
    )
    assert real == 100
    for chunks, samples in windows:
        assert len(chunks) <= 4 and set((samples // 8).tolist()) == set(chunks.tolist())


def test_epoch_sequence_is_every_valid_sample_once_chunk_by_chunk():
    valid = np.arange(50) % 7 != 0
    seq = epoch_sequence(50, 8, seed=0, epoch=1, valid=valid)
    assert sorted(seq.tolist()) == np.flatnonzero(valid).tolist()
    chunk = seq // 8
    assert len(set(chunk.tolist())) == int((np.diff(chunk) != 0).sum()) + 1  # contiguous


def test_a_pass_that_served_every_batch_is_complete():
    assert epoch_after(3, 5, 9) == (3, 5)
    assert epoch_after(3, 9, 9) == (4, 0)
    assert samples_per_rank(10, 4) == 2 and samples_per_rank(10, 4, pad=True) == 3


def test_holes_are_left_out():
    valid = np.ones(90, bool)
    valid[[0, 17, 45, 89]] = False
    order = epoch_order(90, 8, seed=0, epoch=0, valid=valid)
    assert sorted(order.tolist()) == np.flatnonzero(valid).tolist()


def test_buffer_window_mixes_only_within_window():
    order = epoch_order(256, 8, seed=0, epoch=0, buffer_chunks=4)
    first = epoch_sequence(256, 8, seed=0, epoch=0)[:32]  # the first 4 chunks of the epoch
    assert set(order[:32].tolist()) == set(first.tolist())


def test_no_shuffle_is_identity():
    assert epoch_order(50, 8, seed=9, epoch=4, shuffle=False).tolist() == list(range(50))


def test_variant_cycle_serves_each_variant_once_per_block():
    seq = [variant_for_epoch(0, e, 4) for e in range(12)]
    for block in range(3):
        assert sorted(seq[block * 4 : (block + 1) * 4]) == [0, 1, 2, 3]
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


def test_more_ranks_than_samples_is_an_error_unless_padded():
    with pytest.raises(ValueError, match="8 ranks share 5 samples"):
        epoch_order(5, 32, seed=1, epoch=0, rank=0, world_size=8)
    assert len(epoch_order(100, 32, seed=1, epoch=0, rank=7, world_size=8)) == 12


def test_holes_set_the_common_length():
    valid = np.arange(250) % 9 != 0
    orders = [
        epoch_order(250, 32, seed=1, epoch=0, rank=r, world_size=3, valid=valid) for r in range(3)
    ]
    assert {len(o) for o in orders} == {samples_per_rank(int(valid.sum()), 3)}
    assert len(np.unique(np.concatenate(orders))) == 3 * len(orders[0])


@pytest.mark.parametrize(("n", "batch", "buffer_chunks"), [(257, 10, 3), (256, 64, 8), (100, 7, 1)])
def test_batch_sorting_keeps_every_batch_and_window_and_sorts_inside(n, batch, buffer_chunks):
    kw = dict(seed=3, epoch=2, rank=1, world_size=2, buffer_chunks=buffer_chunks)
    valid = np.arange(n) % 11 != 0  # holes shift the window boundaries off the batch grid
    plain = epoch_order(n, 8, valid=valid, **kw)
    batched = epoch_order(n, 8, valid=valid, batch_size=batch, **kw)
    assert len(batched) == len(plain)
    windows, _ = rank_windows(n, 8, valid=valid, **kw)
    starts = np.cumsum([0] + [len(samples) for _, samples in windows])
    cuts = sorted(
        {0, len(plain), *range(0, len(plain), batch), *(int(s) for s in starts if s < len(plain))}
    )
    for lo, hi in itertools.pairwise(cuts):  # every (batch, window) segment: same set, sorted
        assert sorted(plain[lo:hi].tolist()) == batched[lo:hi].tolist()
    assert not np.array_equal(plain, batched)
    for lo in range(0, len(plain), batch):  # each batch holds exactly its samples
        assert set(plain[lo : lo + batch].tolist()) == set(batched[lo : lo + batch].tolist())


def test_batch_sorting_leaves_store_order_alone():
    assert epoch_order(50, 8, seed=9, epoch=4, shuffle=False, batch_size=6).tolist() == list(
        range(50)
    )
    with pytest.raises(ValueError, match="batch_size"):
        epoch_order(50, 8, seed=0, epoch=0, batch_size=0)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 300),
    chunk=st.integers(1, 40),
    world=st.integers(1, 9),
    buffer_chunks=st.integers(1, 4),
    pad=st.booleans(),
    shuffle=st.booleans(),
    holes=st.integers(0, 2**30),
    epoch=st.integers(0, 5),
)
def test_rank_shares_hold_for_any_geometry(
    n, chunk, world, buffer_chunks, pad, shuffle, holes, epoch
):
    valid = np.random.default_rng(holes).random(n) < 0.8
    total = int(valid.sum())
    kw = dict(
        seed=holes,
        epoch=epoch,
        world_size=world,
        shuffle=shuffle,
        buffer_chunks=buffer_chunks,
        valid=valid,
        pad=pad,
    )
    if total and total < world and not pad:
        with pytest.raises(ValueError, match=f"{world} ranks share {total} samples"):
            rank_windows(n, chunk, rank=0, **kw)
        return
    shares = [rank_windows(n, chunk, rank=r, **kw) for r in range(world)]
    orders = [epoch_order(n, chunk, rank=r, batch_size=5, **kw) for r in range(world)]
    assert {len(o) for o in orders} == {samples_per_rank(total, world, pad=pad)}
    real = np.concatenate([o[:k] for o, (_, k) in zip(orders, shares, strict=True)] or [[]])
    assert len(np.unique(real)) == len(real) and set(real.tolist()) <= set(np.flatnonzero(valid))
    if pad:  # every sample exactly once, fewer than world repeats
        assert len(real) == total and sum(len(o) for o in orders) - total < world
    else:  # fewer than world samples left out, no repeats
        assert total - len(real) < world and all(
            k == len(o) for o, (_, k) in zip(orders, shares, strict=True)
        )
    for o, (windows, _) in zip(orders, shares, strict=True):
        assert len(np.unique(o)) == len(o)
        assert sorted(o.tolist()) == sorted(np.concatenate([s for _, s in windows] or [[]]))
        for chunks, samples in windows:
            assert len(chunks) <= buffer_chunks
            assert set((samples // chunk).tolist()) == set(chunks.tolist())


@pytest.mark.parametrize(("n", "chunk", "world"), [(10, 16, 3), (50, 64, 4), (100, 8, 3)])
def test_samples_left_out_on_several_ranks_change_every_epoch(n, chunk, world):
    # drop_last on several ranks used to leave out the tail of the chunk read last: in a store
    # of one chunk, the same samples every epoch, never trained on
    kw = dict(seed=3, world_size=world, buffer_chunks=2)
    left_out = []
    for epoch in range(60):
        served = np.concatenate(
            [epoch_order(n, chunk, epoch=epoch, rank=r, **kw) for r in range(world)]
        )
        assert len(served) == n - n % world and len(np.unique(served)) == len(served)
        left_out.append(sorted(set(range(n)) - set(served.tolist())))
    counts = np.bincount(np.concatenate(left_out).astype(np.int64), minlength=n)
    assert (counts > 0).sum() > 0.6 * min(n, 60 * (n % world))  # spread, not a fixed few
    assert counts.max() < 60 * (n % world) / n * 3 + 5
    again = [epoch_order(n, chunk, epoch=7, rank=r, **kw) for r in range(world)]
    assert sorted(set(range(n)) - set(np.concatenate(again).tolist())) == left_out[7]


def test_without_shuffle_the_last_samples_are_left_out():
    orders = [
        epoch_order(10, 4, seed=0, epoch=e, rank=r, world_size=3, shuffle=False)
        for r in range(3)
        for e in (0, 1)
    ]
    assert set(np.concatenate(orders).tolist()) == set(range(9))
