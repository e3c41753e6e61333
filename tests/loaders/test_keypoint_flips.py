"""A keypoints store without flip pairs warns once when a flipping loader is made.

The default ``TrainAugment`` flips half the samples; without ``--flip-pairs`` a flipped
sample's left landmark lies where the right one should, and nothing said so. The kind says it
(``Kind.flip_warning``), once per loader, not per batch.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from loaders import StoreLoader
from loaders.augment import EvalAugment, TrainAugment
from tests.loaders.v2stores import make_v2_index_store


def _flip_warnings(store: Path, augment: object) -> list[str]:
    """The flip warnings of making a loader and serving two epochs of it."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        loader = StoreLoader(store, 4, augment=augment, seed=0)
        for epoch in range(2):
            loader.set_epoch(epoch)
            for _ in loader:
                pass
    return [str(w.message) for w in said if "flip pairs" in str(w.message)]


def test_a_flip_without_pairs_warns_once_naming_the_field_and_the_fixes(tmp_path: Path) -> None:
    store = make_v2_index_store(tmp_path / "s", 12, flip_pairs=())
    said = _flip_warnings(store, TrainAugment(size=8))
    assert len(said) == 1  # once, when the loader is made: not per batch
    assert said[0].startswith("field 'keypoints' (keypoints) has no flip pairs, and the augment")
    assert "--flip-pairs" in said[0] and "flip=None" in said[0]
    with pytest.warns(UserWarning, match="no flip pairs"):  # a UserWarning, at construction
        StoreLoader(store, 4, augment=TrainAugment(size=8))


def test_no_warning_without_a_flip_or_with_pairs(tmp_path: Path) -> None:
    bare = make_v2_index_store(tmp_path / "bare", 12, flip_pairs=())
    assert _flip_warnings(bare, TrainAugment(size=8, flip=None)) == []
    assert _flip_warnings(bare, EvalAugment(size=8)) == []
    assert _flip_warnings(bare, None) == []
    paired = make_v2_index_store(tmp_path / "paired", 12, flip_pairs=((0, 2),))
    assert _flip_warnings(paired, TrainAugment(size=8)) == []
