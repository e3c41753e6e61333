"""A v2 store on CUDA: every field arrives on the device and matches the CPU (grid path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.augment import TrainAugment
from tests.contracts.index_store import collect
from tests.loaders.v2stores import check_index_rows, make_v2_index_store

pytestmark = pytest.mark.gpu


def test_every_field_is_moved_to_the_device(tmp_path: Path) -> None:
    path = make_v2_index_store(tmp_path / "s", 40, holes=(5,))
    for batch in StoreLoader(path, 8, device="cuda", seed=1):
        assert {t.device.type for t in batch.values()} == {"cuda"}
        check_index_rows({k: v.cpu().numpy() for k, v in batch.items()})


def test_cuda_fields_match_the_cpu(tmp_path: Path) -> None:
    path = make_v2_index_store(tmp_path / "s", 40)
    aug = TrainAugment(size=12, path="grid")
    kw = {"seed": 2, "augment": aug}
    cpu = collect(StoreLoader(path, 8, device="cpu", **kw))
    cuda = collect(StoreLoader(path, 8, device="cuda", **kw))
    for c, g in zip(cpu, cuda, strict=True):
        np.testing.assert_array_equal(c["mask"], g["mask"])
        np.testing.assert_allclose(c["keypoints"], g["keypoints"], atol=1e-4)
        np.testing.assert_allclose(c["image"], g["image"], atol=1e-3)
