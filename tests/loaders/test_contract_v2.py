"""The loader contract suite over a v2 store (image + mask + keypoints + label).

Every check of :class:`tests.contracts.loader_contract.LoaderContract` runs on a store of
named fields written by :mod:`tests.loaders.v2stores`, where each field encodes the sample's
index, so every batch row is checked in every field: resume mid-epoch (every entry equal),
ranks (odd world sizes too), no repeats or skips, ``is_pad``, holes left out through ``valid``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from loaders import StoreLoader
from loaders.errors import StoreMetadataError
from precompute.fields import FieldSpec
from tests.contracts.loader_contract import LoaderContract
from tests.loaders.v2stores import check_index_rows, make_v2_index_store


class _DrawFieldsMixup:
    """The suite's draw mixup over fields: ``label`` -> ``target`` = (label, one draw)."""

    def apply_fields(
        self, values: Mapping[str, Any], fields: Sequence[FieldSpec], gen: torch.Generator
    ) -> dict[str, Any]:
        out = dict(values)
        labels = out.pop("label")
        draws = torch.rand(len(labels), generator=gen, dtype=torch.float64, device=gen.device)
        out["target"] = torch.stack([labels.to(draws.device, torch.float64), draws], 1)
        return out


class TestStoreLoaderContractV2(LoaderContract):
    make_store = staticmethod(make_v2_index_store)
    MIXUP = _DrawFieldsMixup()

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> StoreLoader:
        return StoreLoader(store_path, device="cpu", **kw)

    def check_rows(self, batch: dict[str, Any]) -> None:
        assert set(batch) == {"image", "mask", "keypoints", "label", "index", "is_pad"}
        check_index_rows(batch)

    def test_variant_follows_the_epoch(self, tmp_path: Path) -> None:
        """A store of fields has one variant (the build refuses more); one with K is refused."""
        path = make_v2_index_store(tmp_path / "v", 40, variants=3)
        with pytest.raises(StoreMetadataError, match="variants 3 with fields"):
            StoreLoader(path, 8)


class TestStoreLoaderContractV2Inline(TestStoreLoaderContractV2):
    """Same suite reading on the calling thread, one-chunk windows, memory-mapped reads."""

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> StoreLoader:
        kw = {"prefetch": 0, "buffer_chunks": 1, "num_threads": 1, "io": "mmap", **kw}
        return StoreLoader(store_path, device="cpu", **kw)


def test_v2_batches_hold_every_field_as_stored(tmp_path: Any) -> None:
    path = make_v2_index_store(tmp_path / "s", 30, holes=(4, 5))
    loader = StoreLoader(path, 8, seed=2, drop_last=False)
    got = [{k: v.numpy() for k, v in b.items()} for b in loader]
    for b in got:
        assert b["mask"].dtype == np.uint8 and b["keypoints"].dtype == np.float32
        check_index_rows(b)
    assert sorted(np.concatenate([b["index"] for b in got]).tolist()) == sorted(
        set(range(30)) - {4, 5}
    )
