"""StoreLoader over several ranks with the figures of the coverage bug (chunks of 32 samples).

Ranks used to be evened out by dropping whole chunks: a validation pass over 600 samples saw
512 of them on 4 ranks and 576 on 2, over 1,600 samples 1,536 on 3, 4 or 8 ranks, and a
training epoch over 180 samples on 4 ranks served 128.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loaders import StoreLoader
from tests.contracts.loader_contract import collect, decode_index, make_index_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("ranks")
    return {
        n: make_index_store(root / str(n), n, size=8, chunk_samples=32, shard_samples=64)
        for n in (180, 600, 1600)
    }


def _pass(store: Path, world_size: int, **kw: object) -> list[list[dict[str, np.ndarray]]]:
    return [
        collect(StoreLoader(store, 16, rank=r, world_size=world_size, prefetch=0, **kw))
        for r in range(world_size)
    ]


@pytest.mark.parametrize(("n", "world_size"), [(600, 4), (600, 2), (1600, 3), (1600, 4), (1600, 8)])
def test_validation_pass_sees_every_sample_exactly_once(
    stores: dict[int, Path], n: int, world_size: int
) -> None:
    ranks = _pass(stores[n], world_size, shuffle=False, drop_last=False)
    assert len({len(batches) for batches in ranks}) == 1  # all ranks step together
    served = np.concatenate([b["index"] for batches in ranks for b in batches])
    pad = np.concatenate([b["is_pad"] for batches in ranks for b in batches])
    assert sorted(served[~pad].tolist()) == list(range(n))
    assert pad.sum() == -(-n // world_size) * world_size - n
    for batches in ranks:
        for b in batches:
            np.testing.assert_array_equal(decode_index(b["image"]), b["index"])


def test_training_epoch_drops_less_than_a_batch_per_rank(stores: dict[int, Path]) -> None:
    ranks = [
        collect(StoreLoader(stores[180], 8, rank=r, world_size=4, prefetch=0)) for r in range(4)
    ]
    served = np.concatenate([b["index"] for batches in ranks for b in batches])
    assert len(served) == len(np.unique(served)) == 160  # 45 a rank, 5 batches of 8
    assert 180 - len(served) < 4 * 8
