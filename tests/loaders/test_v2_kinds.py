"""The other kinds through ``StoreLoader``: 1-channel images, multi-labels, arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.augment import AugmentError, Mixup, TrainAugment
from loaders.augment.image.ops import ColorJitter
from precompute.fields import FieldSpec
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from tests.contracts.index_store import collect
from tests.loaders.v2stores import write_v2_store

S, N, CLASSES = 16, 20, 5
FIELDS = (
    FieldSpec("image", "image", {"channels": 1}),
    FieldSpec("tags", "labels", {"classes": CLASSES}),
    FieldSpec("meta", "array", {"shape": [2, 3], "dtype": "float16"}),
)


def _grey() -> np.ndarray:
    rows, cols = np.ogrid[:S, :S]
    idx = np.arange(N)[:, None, None]
    return ((rows * 13 + cols * 7 + idx * 5) % 256).astype(np.uint8)


def _tags() -> np.ndarray:
    idx = np.arange(N)[:, None]
    return ((idx >> np.arange(CLASSES)) & 1).astype(np.uint8)


def _meta() -> np.ndarray:
    return (np.arange(N * 6).reshape(N, 2, 3) / 4).astype(np.float16)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A v2 store (grey image, tags, meta) and a v1 store of the same pixels as RGB."""
    root = tmp_path_factory.mktemp("kinds")
    spec = BuildSpec(size=S, chunk_samples=4, shard_samples=8)
    data = {"image": _grey()[..., None], "tags": _tags(), "meta": _meta()}
    v2 = write_v2_store(root / "v2", FIELDS, data, spec, valid=np.ones(N, np.uint8))
    rgb = np.repeat(_grey()[..., None], 3, -1)
    write_store_from_arrays(root / "v1", rgb, np.zeros(N, np.int64), spec)
    return v2, root / "v1"


def test_every_kind_is_served_as_stored_without_augment(stores: tuple[Path, Path]) -> None:
    for b in collect(StoreLoader(stores[0], 4, seed=3)):
        assert set(b) == {"image", "tags", "meta", "index", "is_pad"}
        assert b["image"].dtype == np.uint8 and b["image"].shape == (4, S, S, 1)
        np.testing.assert_array_equal(b["image"][..., 0], _grey()[b["index"]])
        np.testing.assert_array_equal(b["tags"], _tags()[b["index"]])
        assert b["meta"].dtype == np.float16
        np.testing.assert_array_equal(b["meta"], _meta()[b["index"]])


@pytest.mark.parametrize("path", ["grid", "fast"])
def test_a_grey_image_takes_the_rgb_image_path(stores: tuple[Path, Path], path: str) -> None:
    aug = TrainAugment(size=10, jitter=ColorJitter(0.3, 0.3, 0.3), path=path)
    grey = collect(StoreLoader(stores[0], 4, seed=3, augment=aug))
    rgb = collect(StoreLoader(stores[1], 4, seed=3, augment=aug))  # the v1 path, same draw
    for g, r in zip(grey, rgb, strict=True):
        assert g["image"].shape == (4, 1, 10, 10) and g["image"].dtype == np.float32
        np.testing.assert_allclose(g["image"], r["image"][:, :1], atol=1e-5)
        np.testing.assert_array_equal(g["tags"], _tags()[g["index"]])  # untouched
        np.testing.assert_array_equal(g["meta"], _meta()[g["index"]])


def test_an_array_field_refuses_mixing(stores: tuple[Path, Path]) -> None:
    with pytest.raises(AugmentError, match=r"field 'meta' \(kind array\) can be neither"):
        StoreLoader(stores[0], 4, augment=TrainAugment(size=10), mixup=Mixup(CLASSES))


def test_cutmix_mixes_multi_labels_by_the_pasted_area(tmp_path: Path) -> None:
    fields = FIELDS[:2]
    spec = BuildSpec(size=S, chunk_samples=4, shard_samples=8)
    data = {"image": _grey()[..., None], "tags": _tags()}
    path = write_v2_store(tmp_path / "s", fields, data, spec, valid=np.ones(N, np.uint8))
    cut = Mixup(CLASSES, mixup_alpha=0.0, cutmix_alpha=1.0)
    aug = TrainAugment(size=10, normalize=None)
    plain = collect(StoreLoader(path, 4, seed=5, augment=aug))
    mixed = collect(StoreLoader(path, 4, seed=5, augment=aug, mixup=cut))
    shares = []
    for a, m in zip(plain, mixed, strict=True):
        hot = _tags()[m["index"]].astype(np.float32)
        pasted = (m["image"] != a["image"]).any(1)[0].mean()  # the box's share of the frame
        want = (1 - pasted) * hot + pasted * hot[::-1]
        np.testing.assert_allclose(m["tags"], want, atol=0.05)
        shares.append(pasted)
    assert max(shares) > 0.1  # boxes were pasted


def test_a_store_of_small_fields_only_streams_nothing(tmp_path: Path) -> None:
    from loaders.diagnostics.loader_info import _storeloader

    fields = (FieldSpec("label", "label"), FIELDS[2])
    spec = BuildSpec(size=S, chunk_samples=4, shard_samples=8)
    valid = np.ones(N, np.uint8)
    valid[6] = 0
    data = {"label": np.where(valid == 1, np.arange(N) % 3, -1), "meta": _meta()}
    loader = StoreLoader(write_v2_store(tmp_path / "s", fields, data, spec, valid=valid), 4)
    assert not loader.source.streams and _storeloader(loader)["io"] is None
    batches = collect(loader)
    index = np.concatenate([b["index"] for b in batches])
    assert len(index) == 16 and 6 not in index.tolist()
    for b in batches:
        assert set(b) == {"label", "meta", "index", "is_pad"}
        np.testing.assert_array_equal(b["label"], b["index"] % 3)
        np.testing.assert_array_equal(b["meta"], _meta()[b["index"]])
