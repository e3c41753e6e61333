"""The selection layer's pure functions: draws, mixtures and an epoch on another world size.

Invariants, over many geometries: a plain selection is the plain order; weighted draws follow
their weights; each plan's windows read every chunk they serve; a mixture's batches hold the
stores in proportion; and an epoch begun on ``P`` ranks and resumed on ``W`` serves every
remaining sample of its global batches exactly once, in the same global batches.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.batching.plan import EpochPlan, epoch_plan
from loaders.selection import Pool, Selection, plan_epoch
from loaders.selection.draws import served
from loaders.selection.mixture import batch_counts, shares, stream
from loaders.selection.weights import balanced_weights, repeat_factors
from precompute.fields import ClassCounts


def _plain(n: int, chunk: int, valid: np.ndarray | None = None) -> Selection:
    members = np.flatnonzero(np.ones(n, bool) if valid is None else valid).astype(np.int64)
    return Selection((Pool(members, plain=valid is None),), n, chunk)


def _windows_read_what_they_serve(plan: EpochPlan) -> None:
    for number, w in enumerate(plan.windows):
        served_here = plan.order[plan.window_of == number]
        assert set((served_here // plan.chunk_samples).tolist()) <= set(w.chunks.tolist())
        assert len(np.unique(w.chunks)) == len(w.chunks)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 200),
    chunk=st.integers(1, 16),
    world=st.integers(1, 5),
    pad=st.booleans(),
    seed=st.integers(0, 2**20),
)
def test_a_plain_selection_is_the_plain_plan(n, chunk, world, pad, seed):
    valid = np.random.default_rng(seed).random(n) < 0.9
    if valid.sum() < world and not pad:
        return
    sel = _plain(n, chunk, valid)
    for rank in range(world):
        kw = dict(seed=seed, epoch=3, rank=rank, world_size=world, shuffle=True, buffer_chunks=2)
        got = plan_epoch(sel, batch_size=4, drop_last=not pad, **kw)
        want = epoch_plan(n, chunk, valid=valid, batch_size=4, pad=pad, **kw)
        np.testing.assert_array_equal(got.order, want.order)
        np.testing.assert_array_equal(got.pad, want.pad)
        assert [w.chunks.tolist() for w in got.windows] == [w.chunks.tolist() for w in want.windows]


def test_weighted_draws_follow_their_weights_and_are_pure():
    members = np.arange(0, 400, 2, dtype=np.int64)
    weights = np.where(members < 40, 9.0, 1.0)  # 20 heavy members of 200
    pool = Pool(members, weights, draws=20_000)
    drawn = served(pool, seed=3, epoch=1)
    assert len(drawn) == 20_000 and np.all(np.diff(drawn) >= 0)
    heavy = np.isin(drawn, members[:20]).mean()
    assert abs(heavy - 180 / 360) < 0.02  # 20 * 9 of 20 * 9 + 180 * 1
    np.testing.assert_array_equal(drawn, served(pool, seed=3, epoch=1))
    assert not np.array_equal(drawn, served(pool, seed=3, epoch=2))
    once = served(Pool(members, weights, replacement=False, draws=30), seed=0, epoch=0)
    assert len(np.unique(once)) == 30 and set(once.tolist()) <= set(members.tolist())
    zero = served(Pool(members, np.where(members < 40, 1.0, 0.0), replacement=False, draws=20),
                  seed=0, epoch=0)  # fmt: skip
    np.testing.assert_array_equal(zero, members[:20])  # a weight of 0 is never drawn


def test_class_balanced_weights_and_repeat_factors():
    labels = np.array([0] * 95 + [1] * 5)
    counts = ClassCounts(np.arange(100), labels, np.ones(100, np.int64), 2)
    w = balanced_weights(counts, np.arange(100, dtype=np.int64))
    assert np.isclose(w[labels == 0].sum(), w[labels == 1].sum())
    # a mask of 90% background and 10% of a rare class, and masks of background only
    pixels = ClassCounts(
        np.array([0, 0, 1, 2]), np.array([0, 1, 0, 0]), np.array([90, 10, 100, 100]), 2
    )
    mw = balanced_weights(pixels, np.arange(3, dtype=np.int64))
    assert mw[0] > mw[1] == mw[2]
    r = repeat_factors(counts, np.arange(100, dtype=np.int64), threshold=0.2)
    assert np.allclose(r[labels == 1], np.sqrt(0.2 / 0.05)) and np.all(r[labels == 0] == 1)


@pytest.mark.parametrize("p", [(0.7, 0.3), (0.5, 0.25, 0.25), (0.9, 0.1)])
def test_batch_counts_hold_the_proportions_in_every_batch(p):
    counts = batch_counts(p, 40, 32)
    assert (counts.sum(1) == 32).all()
    assert (np.abs(counts - np.array(p) * 32) < 1 + 1e-9).all()  # within one sample a batch
    cumulative = np.cumsum(counts, 0)
    ideal = np.outer(np.arange(1, 41) * 32, p)
    assert (np.abs(cumulative - ideal) <= 1 + 1e-9).all()
    assert sum(shares(101, p)) == 101


def test_a_stores_stream_runs_through_its_own_epochs_each_a_permutation():
    sel = Selection(
        (Pool(np.arange(0, 10, dtype=np.int64)), Pool(np.arange(16, 40, dtype=np.int64))),
        40, 8, (0.5, 0.5),
    )  # fmt: skip
    taken = stream(sel, 0, 0, 35, seed=1, shuffle=True)  # three and a half own epochs
    for own in range(3):
        assert sorted(taken[own * 10 : (own + 1) * 10].tolist()) == list(range(10))
    assert len({tuple(taken[k * 10 : k * 10 + 10].tolist()) for k in range(3)}) > 1
    np.testing.assert_array_equal(stream(sel, 0, 12, 10, seed=1, shuffle=True), taken[12:22])


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(20, 260),
    chunk=st.integers(1, 12),
    parts=st.integers(1, 6),
    part_batch=st.integers(1, 6),
    world=st.integers(1, 7),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**16),
    weighted=st.booleans(),
)
def test_an_epoch_resumed_on_another_world_keeps_its_global_batches(
    n, chunk, parts, part_batch, world, drop_last, seed, weighted
):
    whole = parts * part_batch
    if whole % world:
        return
    members = np.arange(n, dtype=np.int64)
    pool = Pool(members, np.linspace(1, 3, n), draws=n) if weighted else Pool(members, plain=True)
    sel = Selection((pool,), n, chunk)
    kw = dict(seed=seed, epoch=2, shuffle=True, buffer_chunks=2, drop_last=drop_last)
    if n < parts and drop_last:
        return
    saved = [
        plan_epoch(sel, rank=p, world_size=parts, batch_size=part_batch, **kw) for p in range(parts)
    ]
    size = whole // world
    mine = [
        plan_epoch(sel, rank=r, world_size=world, batch_size=size, layout=(parts, part_batch), **kw)
        for r in range(world)
    ]
    batches = saved[0].batches(part_batch, drop_last)
    assert {m.batches(size, drop_last) for m in mine} == {batches}  # every rank alike
    for b in range(batches):
        want = np.concatenate([s.order[b * part_batch : (b + 1) * part_batch] for s in saved])
        want_pad = np.concatenate([s.pad[b * part_batch : (b + 1) * part_batch] for s in saved])
        got = np.concatenate([m.order[b * size : (b + 1) * size] for m in mine])
        got_pad = np.concatenate([m.pad[b * size : (b + 1) * size] for m in mine])
        real = ~got_pad
        # the real samples of the global batch, exactly once; the rest repeats, marked
        assert sorted(got[real].tolist()) == sorted(want[~want_pad].tolist())
        if b < batches - 1 or drop_last:
            np.testing.assert_array_equal(got, want)
    for m in mine:
        _windows_read_what_they_serve(m)
