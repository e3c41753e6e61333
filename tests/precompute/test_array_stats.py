"""Per-band statistics folded from uneven shards equal numpy's on the concatenated data."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from precompute.arrays.stats import BandStats, merge, partial
from precompute.errors import SpecError

BANDS = 6


def _shards(seed: int = 0) -> list[np.ndarray]:
    """Uneven shards of 9 x 9 x BANDS patches around 1e6 (band b offset by b * 1e5)."""
    rng = np.random.default_rng(seed)
    offset = 1e6 + 1e5 * np.arange(BANDS)
    return [offset + rng.normal(size=(n, 9, 9, BANDS)) for n in (1, 17, 3, 40, 0, 8)]


def _fold(parts: list[BandStats]) -> BandStats:
    return functools.reduce(merge, parts)


def test_merged_partials_equal_numpy_on_the_concatenation() -> None:
    shards = _shards()
    got = _fold([partial(s) for s in shards])
    flat = np.concatenate(shards).reshape(-1, BANDS)
    assert got.count.tolist() == [len(flat)] * BANDS
    np.testing.assert_allclose(got.mean, flat.mean(axis=0), rtol=1e-13, atol=0)
    np.testing.assert_allclose(got.std, flat.std(axis=0), rtol=1e-9)
    assert np.array_equal(got.min, flat.min(axis=0)) and np.array_equal(got.max, flat.max(axis=0))
    naive = np.sqrt((flat**2).mean(axis=0) - flat.mean(axis=0) ** 2)  # what the merge avoids
    assert np.abs(naive / flat.std(axis=0) - 1).max() > 1e-7


def test_the_fold_does_not_depend_on_the_grouping() -> None:
    parts = [partial(s) for s in _shards(1)]
    left = _fold(parts)
    right = merge(parts[0], merge(merge(parts[1], parts[2]), _fold(parts[3:])))
    np.testing.assert_allclose(left.std, right.std, rtol=1e-10)
    np.testing.assert_allclose(left.mean, right.mean, rtol=1e-13)


def test_the_valid_mask_and_non_finite_values_are_left_out_per_band() -> None:
    rng = np.random.default_rng(2)
    batch = rng.normal(size=(4, 5, 5, 3)).astype(np.float32)
    valid = np.ones((4, 5, 5), bool)
    valid[:, :1] = False  # a letterbox border
    batch[0, 3, 3, 1] = np.nan
    got = partial(batch, valid)
    used = batch[valid].astype(np.float64)
    assert got.count.tolist() == [80, 79, 80]
    np.testing.assert_allclose(got.mean[[0, 2]], used[:, [0, 2]].mean(axis=0), rtol=1e-12)
    band1 = used[:, 1][np.isfinite(used[:, 1])]
    np.testing.assert_allclose(got.std[1], band1.std(), rtol=1e-12)


def test_to_dict_is_json_safe_and_round_trips_exactly() -> None:
    stats = merge(partial(_shards()[1]), partial(np.zeros((0, 2, 2, BANDS))))
    data = json.loads(json.dumps(stats.to_dict(), allow_nan=False))
    assert sorted(data) == ["count", "m2", "max", "mean", "min", "std"]
    again = BandStats.from_dict(data)
    for key in ("count", "mean", "m2", "min", "max"):
        assert np.array_equal(getattr(again, key), getattr(stats, key))
    assert data["std"] == stats.std.tolist()


def test_an_empty_band_has_null_statistics_and_merges_as_nothing() -> None:
    empty = partial(np.zeros((2, 2, BANDS)), np.zeros((2, 2), bool))
    data = json.loads(json.dumps(empty.to_dict(), allow_nan=False))
    assert data["count"] == [0] * BANDS and data["mean"] == [None] * BANDS
    full = partial(_shards()[3])
    merged = merge(BandStats.from_dict(data), full)
    assert np.array_equal(merged.mean, full.mean) and np.array_equal(merged.m2, full.m2)


def test_mismatches_are_refused() -> None:
    with pytest.raises(SpecError, match=r"cannot merge statistics of 6 and 2 bands"):
        merge(partial(_shards()[0]), partial(np.zeros((1, 2))))
    with pytest.raises(
        SpecError, match=r"valid_mask has shape \[2\]; the batch's pixels are \[3\]"
    ):
        partial(np.zeros((3, 4)), np.ones(2, bool))
    with pytest.raises(SpecError, match=r"band statistics lack \['m2'\]"):
        BandStats.from_dict({"count": [1], "mean": [0.0], "min": [0.0], "max": [0.0]})
