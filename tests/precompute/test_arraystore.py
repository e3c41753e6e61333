"""In-memory arrays written as a complete store with fields: what readers and verify accept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from precompute.errors import StoreError
from precompute.fields import FieldSpec
from precompute.format.layout import open_store_info
from precompute.format.verify import verify_store
from precompute.pipeline.arraystore import write_fields_store
from precompute.spec import BuildSpec

FIELDS = (
    FieldSpec("image", "image", {"channels": 1}),
    FieldSpec("mask", "mask", {"classes": 3}),
    FieldSpec("keypoints", "keypoints", {"points": 2}),
    FieldSpec("tags", "labels", {"classes": 4}),
)


def test_a_fields_store_from_arrays_opens_and_verifies(tmp_path: Path) -> None:
    n, s = 10, 8
    rng = np.random.default_rng(0)
    valid = np.ones(n, np.uint8)
    valid[3] = 0
    arrays = {
        "image": rng.integers(0, 256, (n, s, s, 1), dtype=np.uint8),
        "mask": rng.integers(0, 3, (n, s, s), dtype=np.uint8),
        "keypoints": np.tile(np.float32([[1.5, 2.5, 2], [7, 0.5, 0]]), (n, 1, 1)),
        "tags": rng.integers(0, 2, (n, 4), dtype=np.uint8),
        "valid": valid,
        "key": [f"k{i}" if i != 3 else "" for i in range(n)],
    }
    arrays["image"][3], arrays["mask"][3], arrays["keypoints"][3], arrays["tags"][3] = 0, 255, 0, 0
    spec = BuildSpec(size=s, shard_samples=4, chunk_samples=2, fields=FIELDS)
    write_fields_store(tmp_path / "s", spec, arrays)
    info = open_store_info(tmp_path / "s")
    assert info.attrs["version"] == 2 and info.num_valid == 9 and info.fields == FIELDS
    assert verify_store(tmp_path / "s") == []
    with pytest.raises(StoreError, match=r"no values for the store's array\(s\) \['tags'\]"):
        write_fields_store(tmp_path / "t", spec, {k: v for k, v in arrays.items() if k != "tags"})
