"""Choosing samples through ``loaders.tf`` (a Keras loop) and ``loaders.jax``: the same layer.

Both take StoreLoader's selection options, so a class-balanced mixture serves the batches
StoreLoader serves, and a run of 4 ranks (each its own dataset, as each process would make it)
stopped mid-epoch resumes on 2 and on 3 ranks from rank 0's state, serving the rest of the
epoch's global batches exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import loaders
from loaders import StoreLoader
from tests.contracts.index_store import cat, collect, decode_index, make_index_store
from tests.lazymodule import LazyModule

jax = LazyModule("jax")
GLOBAL, STOP = 12, 2
OPTIONS = {"seed": 4, "balance": "label"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("frameworks")
    big = make_index_store(root / "a", 150, size=4, chunk_samples=8, holes=(3, 77))
    small = make_index_store(root / "b", 40, size=4, chunk_samples=4)
    return big, small


class Keras:
    """A Keras-style loop over ``loaders.tf.dataset``: its checkpoint is the LoaderState."""

    def __init__(self, store: Any, batch: int, **kw: Any) -> None:
        self.state = loaders.tf.LoaderState()
        self.dataset = loaders.tf.dataset(store, batch, state=self.state, **kw)

    def batches(self, limit: int | None = None) -> list[np.ndarray]:
        out = []
        for element in self.dataset:  # the dict of a batch, as a Keras train_step gets it
            out.append(element["index"].numpy())
            if len(out) == limit:
                break
        return out


class Jax:
    """A JAX loop over ``loaders.jax.batches``."""

    def __init__(self, store: Any, batch: int, **kw: Any) -> None:
        self.state = loaders.jax.batches(store, batch, **kw)

    def batches(self, limit: int | None = None) -> list[np.ndarray]:
        out = []
        for batch in self.state:
            assert isinstance(batch["image"], jax.Array)
            out.append(np.asarray(batch["index"]))
            if len(out) == limit:
                break
        return out


LOOPS: dict[str, Callable[..., Any]] = {"keras": Keras, "jax": Jax}


def _global(per_rank: Iterable[list[np.ndarray]]) -> list[list[int]]:
    ranks = list(per_rank)
    return [sorted(np.concatenate([r[b] for r in ranks]).tolist()) for b in range(len(ranks[0]))]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_balanced_mixture_serves_store_loaders_batches(loop: str, stores: tuple) -> None:
    kw = {**OPTIONS, "proportions": [0.75, 0.25]}
    got = LOOPS[loop](list(stores), 8, **kw).batches()
    want = collect(StoreLoader(list(stores), 8, **kw))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w["index"])
        np.testing.assert_array_equal(decode_index(w["image"]), w["index"])


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_four_ranks_stopped_mid_epoch_resume_on_two_and_three(loop: str, stores: tuple) -> None:
    store = stores[0]
    make = LOOPS[loop]
    four = [make(store, GLOBAL // 4, rank=r, world_size=4, **OPTIONS) for r in range(4)]
    head = _global(f.batches(STOP) for f in four)
    saved = four[0].state.state_dict()  # rank 0's checkpoint resumes every rank
    whole = [
        [b["index"] for b in collect(StoreLoader(store, 3, rank=r, world_size=4, **OPTIONS))]
        for r in range(4)
    ]
    want = _global(whole)
    assert head == want[:STOP]
    for world in (2, 3):
        ranks = [
            make(store, GLOBAL // world, rank=r, world_size=world, **OPTIONS) for r in range(world)
        ]
        for r in ranks:
            r.state.load_state_dict(saved)
        rest = _global(r.batches() for r in ranks)
        assert rest == want[STOP:]
        served = Counter(i for b in head + rest for i in b)
        assert served == Counter(cat([{"i": np.asarray(b)} for b in want], "i").tolist())
