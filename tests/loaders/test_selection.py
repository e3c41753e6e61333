"""Choosing samples with StoreLoader over real stores: subsets, splits, weights, mixtures.

Every store's pixels encode the sample's slot (:mod:`tests.contracts.index_store`), so each test
checks the served images are the samples the batch names, duplicates and mixtures included.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.errors import LoaderError, StoreOpenError
from precompute.cli import cli
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from precompute.splits import Split, read_splits
from tests.contracts.index_store import cat, collect, decode_index, index_images, make_index_store

RARE = 0.05


def _store(root: Path, labels: np.ndarray, keys: list[str] | None = None, chunk: int = 8) -> Path:
    n = len(labels)
    spec = BuildSpec(size=4, chunk_samples=chunk, shard_samples=4 * chunk)
    write_store_from_arrays(root, index_images(n, 4), np.asarray(labels), spec, keys=keys)
    return root


def _served(loader: StoreLoader) -> list[dict[str, np.ndarray]]:
    batches = collect(loader)
    for b in batches:  # every row is the sample its batch names
        np.testing.assert_array_equal(decode_index(b["image"]), b["index"])
    return batches


@pytest.fixture(scope="module")
def rare_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1000 samples, 5% of class 1, spread over the store's slots."""
    labels = (np.random.default_rng(0).permutation(1000) < RARE * 1000).astype(np.int64)
    return _store(tmp_path_factory.mktemp("rare") / "s", labels)


@pytest.mark.parametrize("io", ["mmap", "pread"])
def test_balanced_sampling_serves_a_95_5_store_50_50(rare_store: Path, io: str) -> None:
    loader = StoreLoader(rare_store, 50, seed=1, balance="label", samples_per_epoch=4000, io=io)
    labels = cat(_served(loader), "label")
    assert len(labels) == 4000
    assert abs(labels.mean() - 0.5) < 0.03  # 50/50 within 3 points over the epoch
    plain = cat(collect(StoreLoader(rare_store, 50, seed=1, io=io)), "label")
    assert abs(plain.mean() - RARE) < 0.01  # the store as it is: 95/5


def test_weights_with_and_without_replacement(rare_store: Path) -> None:
    weights = np.zeros(1000)
    weights[:100] = 1.0  # only the first 100 slots can be drawn
    drawn = cat(_served(StoreLoader(rare_store, 25, seed=2, weights=weights)), "index")
    assert len(drawn) == 1000 and drawn.max() < 100  # 1000 draws of 100: each about 10 times
    assert np.bincount(drawn).min() >= 3 and np.bincount(drawn).max() <= 22
    once = StoreLoader(
        rare_store, 25, seed=2, weights=weights, replacement=False, samples_per_epoch=75
    )
    got = cat(_served(once), "index")
    assert len(got) == 75 and len(np.unique(got)) == 75 and got.max() < 100
    with pytest.raises(ValueError, match="samples_per_epoch 101 without replacement: only 100"):
        StoreLoader(
            rare_store, 25, weights=weights, replacement=False, samples_per_epoch=101
        ).plan()


def test_subsets_by_indices_mask_and_predicate(tmp_path: Path) -> None:
    keys = [f"p{i // 10:02d}/img{i:03d}.png" for i in range(120)]
    store = _store(tmp_path / "s", np.arange(120) % 3, keys)
    by_index = cat(_served(StoreLoader(store, 4, subset=[5, 17, 30, 31])), "index")
    assert sorted(by_index.tolist()) == [5, 17, 30, 31]
    mask = np.zeros(120, bool)
    mask[60:] = True
    assert set(cat(_served(StoreLoader(store, 4, subset=mask)), "index").tolist()) == set(
        range(60, 120)
    )
    by_label = StoreLoader(store, 4, subset=lambda s: s["label"] == 2)
    assert set(cat(_served(by_label), "label").tolist()) == {2}
    by_key = StoreLoader(store, 5, subset=lambda s: np.char.startswith(s["key"], "p03/"), keys=True)
    got = [k for b in collect(by_key) for k in b["key"]]
    assert sorted(got) == keys[30:40]
    with pytest.raises(ValueError, match="subset index 120 is outside the 120 slots"):
        StoreLoader(store, 4, subset=[0, 120])
    with pytest.raises(ValueError, match=r"subset names a slot twice; .*weights="):
        StoreLoader(store, 4, subset=[3, 3])
    with pytest.raises(ValueError, match=r"predicate must return a boolean mask of the 120"):
        StoreLoader(store, 4, subset=lambda s: s["label"])


def test_a_grouped_split_puts_no_group_on_two_sides(tmp_path: Path) -> None:
    patients = np.random.default_rng(1).integers(0, 23, 300)  # 23 patients, uneven
    keys = [f"patient{p:02d}/scan{i:03d}.png" for i, p in enumerate(patients)]
    store = _store(tmp_path / "s", patients % 4, keys)
    rule = Split({"train": 0.8, "val": 0.2}, seed=5, group_by=r"^(patient\d+)/")
    sides = {}
    for name in ("train", "val"):
        loader = StoreLoader(store, 1, split=name, splits=rule, shuffle=False, drop_last=False)
        sides[name] = cat(_served(loader), "index")
    assert len(sides["train"]) + len(sides["val"]) == 300
    assert not set(sides["train"].tolist()) & set(sides["val"].tolist())
    groups = {name: set(patients[idx].tolist()) for name, idx in sides.items()}
    assert not groups["train"] & groups["val"]  # no patient on two sides
    assert abs(len(sides["val"]) / 300 - 0.2) < 0.06
    stratified = Split({"train": 0.7, "val": 0.3}, seed=5, stratify="label")
    val = StoreLoader(store, 1, split="val", splits=stratified, drop_last=False)
    labels = cat(collect(val), "label")
    want = np.bincount(patients % 4) * 0.3
    assert np.all(np.abs(np.bincount(labels, minlength=4) - want) <= 1)


def test_a_recorded_split_is_served_and_named_where_it_is_missing(tmp_path: Path) -> None:
    keys = [f"case{i // 3:02d}_{i % 3}.png" for i in range(90)]
    store = _store(tmp_path / "s", np.arange(90) % 5, keys)
    with pytest.raises(ValueError, match="records no split: record one"):
        StoreLoader(store, 4, split="val")
    args = ["split", str(store), "--fractions", "train=0.6,val=0.2,test=0.2", "--seed", "3"]
    cli.main(args=[*args, "--group-by", r"^(case\d+)_"], standalone_mode=False)
    recorded = read_splits(store, 90)
    assert recorded is not None and recorded.names == ("train", "val", "test")
    for name in recorded.names:
        loader = StoreLoader(store, 1, split=name, shuffle=False, drop_last=False)
        got = cat(_served(loader), "index")
        np.testing.assert_array_equal(np.sort(got), np.flatnonzero(recorded.members(name)))
    with pytest.raises(ValueError, match=r"no split 'dev' .*\['train', 'val', 'test'\]"):
        StoreLoader(store, 4, split="dev")


def test_a_mixture_holds_its_proportions_within_a_point(tmp_path: Path) -> None:
    big = make_index_store(tmp_path / "big", 600, size=4, chunk_samples=8, shard_samples=32)
    small = make_index_store(tmp_path / "small", 90, size=4, chunk_samples=4, shard_samples=16)
    for mix in ("batch", "epoch"):
        loader = StoreLoader([big, small], 40, seed=4, proportions=[0.7, 0.3], mix=mix)
        batches = collect(loader)
        for b in batches:  # each store's own slots, its own pixels
            np.testing.assert_array_equal(decode_index(b["image"]), b["index"])
        store = cat(batches, "store")
        assert abs((store == 1).mean() - 0.3) < 0.01  # within one point over the epoch
        if mix == "batch":  # and every batch within one sample of 0.3 * 40
            assert all(abs((b["store"] == 1).sum() - 12) <= 1 for b in batches)
        assert len(store) == 680  # the epoch: the stores' sizes together
        small_seen = cat(batches, "index")[store == 1]
        counts = np.bincount(small_seen, minlength=90)  # 204 of 90: each twice or three times
        assert counts.min() >= 2 and counts.max() <= 3


def test_a_mixtures_stores_must_hold_the_same_fields(tmp_path: Path) -> None:
    images = make_index_store(tmp_path / "a", 40, size=4)
    other = make_index_store(tmp_path / "b", 40, size=8)
    with pytest.raises(StoreOpenError, match=r"need the same fields, size and variants.*image"):
        StoreLoader([images, other], 8)
    with pytest.raises(ValueError, match="weights= gives one weight per slot of one store"):
        StoreLoader([images, images], 8, weights=np.ones(40))
    with pytest.raises(ValueError, match=r"proportions \[0.5, 0.3, 0.2\] name 3 stores; .* has 2"):
        StoreLoader([images, images], 8, proportions=[5, 3, 2])


def test_repeat_factor_sampling(rare_store: Path) -> None:
    loader = StoreLoader(rare_store, 10, seed=0, balance="label", repeat_factor=0.2, shuffle=False)
    index = cat(_served(loader), "index")
    labels = StoreLoader(rare_store, 10).source.labels
    counts = np.bincount(index, minlength=1000)
    assert np.all(counts[labels == 0] == 1)  # common: r = 1
    assert np.all(np.isin(counts[labels == 1], [2, 3]))  # rare: r = sqrt(0.2 / 0.05) = 2


def test_a_weighted_epoch_resumes_exactly_mid_epoch(rare_store: Path) -> None:
    kw = {"seed": 7, "balance": "label", "rank": 1, "world_size": 2}
    first = StoreLoader(rare_store, 20, **kw)
    first.set_epoch(2)
    whole = collect(first)
    first.set_epoch(2)
    collect(first, limit=5)
    resumed = StoreLoader(rare_store, 20, **kw)
    resumed.load_state_dict(first.state_dict())
    np.testing.assert_array_equal(cat(collect(resumed), "index"), cat(whole[5:], "index"))
    other = StoreLoader(rare_store, 20, seed=7, rank=1, world_size=2)
    with pytest.raises(LoaderError, match=r"'selection': .*other samples or weights"):
        other.load_state_dict(first.state_dict())
