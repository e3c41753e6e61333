"""Reusable contract suite for every loader that streams a nostall store.

A loader backend subclasses :class:`LoaderContract` in its own test file and provides
``make_loader(store_path, **kw)``; pytest then runs every ``test_*`` below against it::

    class TestMyLoader(LoaderContract):
        @staticmethod
        def make_loader(store_path, **kw):
            return MyLoader(store_path, device="cpu", **kw)

The keyword arguments the suite passes are ``batch_size``, ``seed``, ``shuffle``, ``drop_last``,
``rank`` and ``world_size``. The loader must yield dicts with ``image`` (uint8 NHWC), ``label``
(int64), ``index`` (int64) and ``is_pad`` (bool) as torch tensors or numpy arrays, and provide
``set_epoch(e)``, ``len()``, ``epoch``, ``state_dict()`` and ``load_state_dict(state)``; bad
stores raise a ``loaders.errors.LoaderError`` when the loader is made, and a corrupted chunk
raises one naming the shard file. A ``mixup`` keyword is passed through too: the loader calls
``mixup(images, labels, generator)`` with the batch's generator.

Epochs and state (the rules of :class:`loaders.contract.ContractLoader`): ``epoch`` is read-only
and ``set_epoch`` takes a non-negative integer; an iteration broken off ends its epoch (the next
iteration serves the next one), only ``load_state_dict`` resumes mid-epoch; a state is plain JSON
holding ``epoch``, ``batch``, ``rank``, the settings and the data identity, and a state that
differs in any setting or in the data is refused naming it (:mod:`tests.contracts.state_contract`).

Multi-rank rules: ranks are disjoint and serve equally many batches; with ``drop_last=False``
they serve every sample exactly once plus fewer than ``world_size`` repeats marked ``is_pad``;
with ``drop_last=True`` an epoch leaves out fewer than ``world_size * batch_size`` samples.

Fixture stores (:mod:`tests.contracts.index_store`) encode each sample's index in its pixels
(channel 0: ``i % 256``, channel 1: ``i // 256``, channel 2: the variant), so every check is
made on the data actually served.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from loaders.batching.order import samples_per_rank, variant_for_epoch
from loaders.errors import LoaderError
from tests.contracts.index_store import (
    NUM_CLASSES,
    LoaderFactory,
    cat,
    collect,
    decode_index,
    make_index_store,
    to_numpy,
)
from tests.contracts.state_contract import LoaderStateContract

__all__ = [
    "Epochs",
    "LoaderContract",
    "LoaderFactory",
    "assert_same_epochs",
    "collect",
    "decode_index",
    "make_index_store",
    "serve_epochs",
    "to_numpy",
]

Epochs = list[list[dict[str, np.ndarray]]]


def serve_epochs(loader: Any, epochs: int) -> Epochs:
    """Epochs ``0 .. epochs - 1`` of ``loader``, every batch copied to numpy; then close it."""
    out: Epochs = []
    try:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            out.append([{k: v.numpy().copy() for k, v in b.items()} for b in loader])
    finally:
        loader.close()
    return out


def assert_same_epochs(got: Epochs, want: Epochs) -> None:
    """The same number of epochs, of the same non-empty batches, key by key and value by value."""
    assert len(got) == len(want)
    for got_epoch, want_epoch in zip(got, want, strict=True):
        assert len(got_epoch) == len(want_epoch) > 0
        for a, b in zip(got_epoch, want_epoch, strict=True):
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _rewrite_attrs(root: Path, **changes: Any) -> None:
    meta = root / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["nostall"].update(changes)
    meta.write_text(json.dumps(doc))


class LoaderContract(LoaderStateContract):
    """Invariant tests every store loader must pass; subclass and define ``make_loader``."""

    make_loader: ClassVar[LoaderFactory]
    # writes the suite's stores: make_index_store's signature (a v2 suite passes its own)
    make_store: ClassVar[Callable[..., Path]] = staticmethod(make_index_store)
    N: ClassVar[int] = 101  # uneven on purpose: not a multiple of chunk, batch or world size
    HOLES: ClassVar[tuple[int, ...]] = (3, 17, 18, 40, 41, 42, 43, 99)

    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return cls.make_store(tmp_path_factory.mktemp("plain") / "s", cls.N)

    @pytest.fixture(scope="class")
    @classmethod
    def holey(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return cls.make_store(tmp_path_factory.mktemp("holey") / "s", cls.N, holes=cls.HOLES)

    def check_rows(self, batch: dict[str, Any]) -> None:
        """Assert that every row of an un-augmented batch holds its sample (image, label)."""
        np.testing.assert_array_equal(decode_index(batch["image"]), batch["index"])
        np.testing.assert_array_equal(batch["label"], batch["index"] % NUM_CLASSES)

    def test_batches_carry_their_own_index_and_label(self, store: Path) -> None:
        batches = self._epoch(store, shuffle=True)
        for b in batches:
            assert b["image"].dtype == np.uint8 and b["image"].ndim == 4
            assert b["image"].shape[-1] == 3
            self.check_rows(b)

    @pytest.mark.parametrize("epoch", [0, 1, 5])
    def test_every_epoch_is_a_permutation(self, store: Path, epoch: int) -> None:
        got = cat(self._epoch(store, epoch, drop_last=False), "index")
        assert sorted(got.tolist()) == list(range(self.N))

    def test_len_matches_batches(self, store: Path) -> None:
        for drop_last in (True, False):
            loader = self.make_loader(store, batch_size=8, seed=0, drop_last=drop_last)
            batches = collect(loader)
            assert len(loader) == len(batches)
            assert all(len(b["index"]) == 8 for b in batches[:-1])
        assert len(batches[-1]["index"]) == self.N % 8

    def test_a_batch_larger_than_a_ranks_samples_with_drop_last_is_refused(
        self, store: Path
    ) -> None:
        """Every epoch would be empty (len 0, the epoch counting up): refused before a batch."""
        with pytest.raises(ValueError, match=rf"batch_size {self.N + 1} is larger than the"):
            self.make_loader(store, batch_size=self.N + 1, seed=0)
        with pytest.raises(ValueError, match=r"than the 50 samples rank 1 of 2 gets an epoch"):
            self.make_loader(store, batch_size=51, seed=0, rank=1, world_size=2)
        loader = self.make_loader(store, batch_size=self.N + 1, seed=0, drop_last=False)
        assert len(loader) == 1 and len(cat(collect(loader), "index")) == self.N

    def test_holes_are_left_out(self, holey: Path) -> None:
        got = cat(self._epoch(holey, drop_last=False), "index")
        want = sorted(set(range(self.N)) - set(self.HOLES))
        assert sorted(got.tolist()) == want

    def _valid(self, fixture: str) -> np.ndarray:
        valid = np.ones(self.N, bool)
        if fixture == "holey":
            valid[list(self.HOLES)] = False
        return valid

    @pytest.mark.parametrize("world_size", [2, 3, 4, 8])
    @pytest.mark.parametrize("fixture", ["store", "holey"])
    @pytest.mark.parametrize("shuffle", [False, True])
    def test_ranks_cover_every_sample_once_without_drop_last(
        self, world_size: int, fixture: str, shuffle: bool, request: pytest.FixtureRequest
    ) -> None:
        # a validation pass: every sample exactly once across ranks, repeats marked is_pad
        path = request.getfixturevalue(fixture)
        kw = {"drop_last": False, "shuffle": shuffle, "world_size": world_size}
        ranks = [self._epoch(path, 2, rank=r, **kw) for r in range(world_size)]
        valid = self._valid(fixture)
        share = samples_per_rank(int(valid.sum()), world_size, pad=True)
        assert {len(cat(batches, "index")) for batches in ranks} == {share}
        assert len({len(batches) for batches in ranks}) == 1  # no rank waits in a collective
        real = [cat(b, "index")[~cat(b, "is_pad").astype(bool)] for b in ranks]
        pads = [cat(b, "index")[cat(b, "is_pad").astype(bool)] for b in ranks]
        assert sorted(np.concatenate(real).tolist()) == np.flatnonzero(valid).tolist()
        assert sum(map(len, pads)) == world_size * share - valid.sum() < world_size
        for batches, rep in zip(ranks, pads, strict=True):
            served = cat(batches, "index")
            assert len(np.unique(served)) == len(served)  # a rank never serves a sample twice
            assert set(rep.tolist()) <= set(np.flatnonzero(valid).tolist())
            for b in batches:
                assert b["is_pad"].dtype == np.bool_
                self.check_rows(b)

    @pytest.mark.parametrize("world_size", [3, 8])
    def test_metric_over_ranks_equals_the_single_rank_metric(
        self, holey: Path, world_size: int
    ) -> None:
        def totals(batches: list[dict[str, Any]]) -> tuple[int, int]:
            correct = count = 0
            for b in batches:  # a fixed "model" guessing the label from the served pixels
                guess = np.where(
                    decode_index(b["image"]) % 3 == 0, 0, decode_index(b["image"]) % NUM_CLASSES
                )
                keep = ~b["is_pad"].astype(bool)
                correct += int((guess == b["label"])[keep].sum())
                count += int(keep.sum())
            return correct, count

        kw = {"batch_size": 5, "shuffle": False, "drop_last": False}
        single = totals(self._epoch(holey, **kw))
        parts = [
            totals(self._epoch(holey, rank=r, world_size=world_size, **kw))
            for r in range(world_size)
        ]
        assert tuple(map(sum, zip(*parts, strict=True))) == single
        assert single[1] == self.N - len(self.HOLES)

    @pytest.mark.parametrize("world_size", [2, 3, 4])
    @pytest.mark.parametrize("fixture", ["store", "holey"])
    def test_training_ranks_disjoint_and_drop_less_than_a_batch_each(
        self, world_size: int, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        path = request.getfixturevalue(fixture)
        ranks = [
            self._epoch(path, 1, rank=r, world_size=world_size)  # drop_last=True
            for r in range(world_size)
        ]
        assert len({len(batches) for batches in ranks}) == 1
        seen = np.concatenate([cat(batches, "index") for batches in ranks])
        assert len(np.unique(seen)) == len(seen)
        assert not np.concatenate([cat(batches, "is_pad") for batches in ranks]).any()
        assert self._valid(fixture).sum() - len(seen) < world_size * 8
        assert not set(seen.tolist()) - set(np.flatnonzero(self._valid(fixture)).tolist())

    def test_epochs_differ_and_seed_repeats(self, store: Path) -> None:
        e0 = cat(self._epoch(store, 0), "index")
        e1 = cat(self._epoch(store, 1), "index")
        again = cat(self._epoch(store, 0), "index")
        other_seed = cat(self._epoch(store, 0, seed=1), "index")
        np.testing.assert_array_equal(e0, again)
        assert not np.array_equal(e0, e1)
        assert not np.array_equal(e0, other_seed)

    def test_no_shuffle_is_store_order(self, store: Path) -> None:
        got = cat(self._epoch(store, 3, shuffle=False, drop_last=False), "index")
        np.testing.assert_array_equal(got, np.arange(self.N))

    def test_epoch_advances_after_a_full_pass(self, store: Path) -> None:
        loader = self.make_loader(store, batch_size=8, seed=0)
        first, second = cat(collect(loader), "index"), cat(collect(loader), "index")
        np.testing.assert_array_equal(first, cat(self._epoch(store, 0), "index"))
        np.testing.assert_array_equal(second, cat(self._epoch(store, 1), "index"))

    def test_a_pass_that_took_len_batches_ends_the_epoch(self, store: Path) -> None:
        # a training loop (Lightning's fetcher) takes len() batches and never sees the end
        loader = self.make_loader(store, batch_size=8, seed=0)
        for epoch in range(3):
            it = iter(loader)
            got = np.concatenate([to_numpy(next(it)["index"]) for _ in range(len(loader))])
            np.testing.assert_array_equal(got, cat(self._epoch(store, epoch), "index"))
            assert loader.epoch == epoch + 1
            saved = loader.state_dict()
            assert (saved["epoch"], saved["batch"]) == (epoch + 1, 0)
        resumed = self.make_loader(store, batch_size=8, seed=0)
        resumed.load_state_dict({**saved, "epoch": 1, "batch": len(resumed)})  # an older save
        np.testing.assert_array_equal(
            cat(collect(resumed), "index"), cat(self._epoch(store, 2), "index")
        )

    @pytest.mark.parametrize("stop_after", [1, 4, 9])
    def test_resume_mid_epoch_gives_identical_remainder(self, holey: Path, stop_after: int) -> None:
        kw = {"batch_size": 4, "seed": 3, "rank": 1, "world_size": 2}
        full = self.make_loader(holey, **kw)
        full.set_epoch(2)
        want = collect(full)
        assert 0 < stop_after < len(want)
        first = self.make_loader(holey, **kw)
        first.set_epoch(2)
        head = collect(first, limit=stop_after)
        state = first.state_dict()
        resumed = self.make_loader(holey, **kw)
        resumed.load_state_dict(state)
        tail = collect(resumed)
        got = head + tail
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.keys() == w.keys()
            for key in w:  # every entry: image, label, a v2 store's other fields, is_pad
                np.testing.assert_array_equal(g[key], w[key])

    def test_another_ranks_state_resumes_and_another_world_size_keeps_the_global_batch(
        self, holey: Path
    ) -> None:
        # ranks step together: a checkpoint written by rank 0 alone resumes every rank
        kw = {"batch_size": 4, "seed": 3, "world_size": 2}
        first = self.make_loader(holey, rank=0, **kw)
        first.set_epoch(1)
        collect(first, limit=3)
        state = first.state_dict()
        wholes = []
        for rank in range(2):
            whole = self.make_loader(holey, rank=rank, **kw)
            whole.set_epoch(1)
            wholes.append(collect(whole)[3:])
        resumed = self.make_loader(holey, rank=1, **kw)
        resumed.load_state_dict(state)
        np.testing.assert_array_equal(cat(collect(resumed), "index"), cat(wholes[1], "index"))
        # the global batches left (rank 0's batch b, then rank 1's), on 1 and on 4 ranks
        left = [np.concatenate([a["index"], b["index"]]) for a, b in zip(*wholes, strict=True)]
        for world in (1, 4):
            got = []
            for rank in range(world):
                other = self.make_loader(
                    holey, rank=rank, world_size=world, batch_size=8 // world, seed=3
                )
                other.load_state_dict(state)
                got.append([b["index"] for b in collect(other)])
            assert {len(g) for g in got} == {len(left)}  # the same batches on every rank
            for number, want in enumerate(left):
                np.testing.assert_array_equal(np.concatenate([g[number] for g in got]), want)
        three = self.make_loader(holey, rank=0, batch_size=4, seed=3, world_size=3)
        with pytest.raises(LoaderError, match=r"global batch of 8; .*3 ranks cannot share it"):
            three.load_state_dict(state)

    def test_variant_follows_the_epoch(self, tmp_path: Path) -> None:
        path = self.make_store(tmp_path / "v", 40, variants=3)
        for epoch in range(4):
            batches = self._epoch(path, epoch, seed=5)
            variants = np.concatenate([b["image"][:, 0, 0, 2] for b in batches])
            assert set(variants.tolist()) == {variant_for_epoch(5, epoch, 3)}
            for b in batches:
                self.check_rows(b)

    def test_corrupted_chunk_raises_naming_the_shard(self, tmp_path: Path) -> None:
        path = self.make_store(tmp_path / "c", 64)
        shard = path / "image" / "c" / "2" / "0" / "0" / "0"
        _flip_byte(shard, 100)  # inside the first inner chunk's pixels
        loader = self.make_loader(path, batch_size=8, seed=0)
        with pytest.raises(LoaderError, match="image/c/2/0/0/0"):
            collect(loader)

    @pytest.mark.parametrize("damage", ["incomplete", "version", "missing_field", "not_a_store"])
    def test_bad_store_raises_before_the_first_batch(self, tmp_path: Path, damage: str) -> None:
        path = self.make_store(tmp_path / "b", 32)
        if damage == "incomplete":
            _rewrite_attrs(path, complete=False)
        elif damage == "version":
            _rewrite_attrs(path, version=99)
        elif damage == "missing_field":
            (path / "extent" / "zarr.json").unlink()
        else:
            (path / "zarr.json").unlink()
        with pytest.raises(LoaderError, match=str(path)):
            self.make_loader(path, batch_size=8, seed=0)
