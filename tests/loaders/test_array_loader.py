"""StoreLoader over a store of spectral cubes built by the real build (issue 14)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

from loaders.augment import AugmentError, EvalAugment, RandomResizedCrop, TrainAugment
from loaders.augment.arrays.policy import BandNormalize
from loaders.errors import StoreOpenError
from loaders.torch_loader import StoreLoader
from precompute.format.layout import open_store_info
from precompute.job import build
from precompute.spec import BuildSpec

H, C, N = 8, 6, 12
WHOLE = RandomResizedCrop(scale=(1.0, 1.0), ratio=(1.0, 1.0))


@pytest.fixture(scope="module")
def store(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 float32 8x8x6 cubes in class folders, built at their own size (no resampling)."""
    root = tmp_path_factory.mktemp("cubes")
    rng = np.random.default_rng(0)
    for i in range(N):
        folder = root / "src" / "abc"[i % 3]
        folder.mkdir(parents=True, exist_ok=True)
        scale = np.arange(1, C + 1, dtype=np.float32) * 10
        np.save(folder / f"{i}.npy", (rng.normal(size=(H, H, C)) * scale + 50).astype(np.float32))
    spec = BuildSpec(size=H, shard_samples=8, chunk_samples=4, seed=1)
    build(str(root / "src"), str(root / "s.zarr"), spec, progress=False)
    return root / "s.zarr"


def _stored(store: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(str(store / "image"), mode="r")[:])


def _batches(loader: StoreLoader) -> list[dict[str, torch.Tensor]]:
    return list(loader)


@pytest.mark.ray
def test_without_augment_batches_are_the_stored_values_bit_exact(store: Path) -> None:
    stored = _stored(store)
    seen = []
    for b in _batches(StoreLoader(store, 5, seed=2, augment=None, drop_last=False)):
        assert b["image"].dtype == torch.float32 and tuple(b["image"].shape[1:]) == (H, H, C)
        idx = b["index"].numpy()
        assert b["image"].numpy().tobytes() == stored[idx].tobytes()
        seen += idx[~b["is_pad"].numpy()].tolist()
    assert sorted(seen) == list(range(N))


@pytest.mark.ray
def test_train_augment_normalises_each_band_with_the_store_statistics(store: Path) -> None:
    stats = open_store_info(store).report["band_stats"]["image"]
    mean, std = np.array(stats["mean"]), np.array(stats["std"])
    loader = StoreLoader(store, 4, seed=2, augment=TrainAugment(size=H, crop=WHOLE, flip=None))
    assert loader.augment.bands == BandNormalize(tuple(mean), tuple(std))
    stored = _stored(store)
    for b in _batches(loader):
        x = b["image"]
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (C, H, H)
        want = (stored[b["index"].numpy()].transpose(0, 3, 1, 2) - mean[:, None, None]) / std[
            :, None, None
        ]
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.ray
def test_bands_none_or_given_and_the_output_dtype(store: Path) -> None:
    stored = _stored(store)
    aug = EvalAugment(size=H, crop={"op": "center_crop", "fraction": 1.0}, bands=None)
    for b in _batches(StoreLoader(store, 4, augment=aug, shuffle=False)):
        assert torch.equal(
            b["image"], torch.from_numpy(stored[b["index"].numpy()]).permute(0, 3, 1, 2)
        )
    given = BandNormalize(mean=[50.0] * C, std=[2.0] * C)
    aug = EvalAugment(size=4, bands=given, dtype="bfloat16")
    b = next(iter(StoreLoader(store, 4, augment=aug)))
    assert b["image"].dtype == torch.bfloat16 and tuple(b["image"].shape) == (4, C, 4, 4)
    with pytest.raises(
        AugmentError, match=r"band_normalize has 3 means; field 'image' has 6 bands"
    ):
        StoreLoader(
            store, 4, augment=EvalAugment(size=4, bands=BandNormalize([0.0] * 3, [1.0] * 3))
        )


@pytest.mark.ray
@pytest.mark.parametrize(
    ("dtype", "channels_last"), [("float32", False), ("bfloat16", True), ("float16", False)]
)
def test_output_dtype_and_memory_format_with_and_without_bands(
    store: Path, dtype: str, channels_last: bool
) -> None:
    stored = torch.from_numpy(_stored(store)).permute(0, 3, 1, 2).double()
    want_dtype = getattr(torch, dtype)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    for bands in (None, BandNormalize(mean=[50.0] * C, std=[2.0] * C)):
        aug = EvalAugment(
            size=H,
            crop={"op": "center_crop", "fraction": 1.0},
            bands=bands,
            dtype=dtype,
            channels_last=channels_last,
        )
        for b in _batches(StoreLoader(store, 4, augment=aug, shuffle=False)):
            x = b["image"]
            assert x.dtype == want_dtype and x.is_contiguous(memory_format=fmt)
            want = stored[b["index"]]
            want = want if bands is None else (want - 50.0) / 2.0
            tol = torch.finfo(want_dtype).eps * float(want.abs().max())
            torch.testing.assert_close(x.double(), want, rtol=0, atol=tol)


@pytest.mark.ray
def test_colour_jitter_is_refused_naming_the_band_count(store: Path) -> None:
    aug = TrainAugment(size=H, jitter={"op": "color_jitter"})
    with pytest.raises(
        AugmentError, match=r"field 'image' is an array of 6 bands: use jitter=None"
    ):
        StoreLoader(store, 4, augment=aug)


@pytest.mark.ray
def test_rot90_turns_each_sample_by_one_drawn_quarter_turn(store: Path) -> None:
    plain = TrainAugment(size=H, crop=WHOLE, flip=None, bands=None)
    turned = TrainAugment(size=H, crop=WHOLE, flip=None, bands=None, rot90=True)
    ks = set()
    for a, b in zip(
        _batches(StoreLoader(store, 4, seed=3, augment=plain)),
        _batches(StoreLoader(store, 4, seed=3, augment=turned)),
        strict=True,
    ):
        assert torch.equal(a["index"], b["index"])
        for x, y in zip(a["image"], b["image"], strict=True):
            k = [j for j in range(4) if torch.equal(torch.rot90(x, j, dims=(1, 2)), y)]
            assert len(k) == 1
            ks.add(k[0])
    assert len(ks) > 1
    again = _batches(StoreLoader(store, 4, seed=3, augment=turned))
    assert all(
        torch.equal(p["image"], q["image"])
        for p, q in zip(again, _batches(StoreLoader(store, 4, seed=3, augment=turned)), strict=True)
    )
    with pytest.raises(AugmentError, match="square size"):
        TrainAugment(size=(8, 6), rot90=True)


@pytest.mark.ray
def test_dali_refuses_the_array_store_naming_the_field(store: Path) -> None:
    from loaders.dali.store import refuse_unserved_fields
    from loaders.store.open_store import open_store

    with pytest.raises(StoreOpenError, match=r"field\(s\) 'image' \(array\) it cannot serve"):
        refuse_unserved_fields(open_store(store))


@pytest.mark.parametrize(
    "mean, match",
    [
        ("123", "must be a list of numbers, got '123'"),  # would parse as bands 1, 2, 3
        (["1", 2.0], "must be a list of numbers"),
        ([True, 1.0], "must be a list of numbers"),
        ([10**400], "must be finite numbers, got \\[1000"),  # float() overflows
        ([float("nan")], "must be finite numbers"),
    ],
)
def test_band_normalize_refuses_what_is_not_a_list_of_finite_numbers(
    mean: object, match: str
) -> None:
    with pytest.raises(AugmentError, match=f"band_normalize.mean {match}"):
        BandNormalize(mean=mean, std=[1.0])  # type: ignore[arg-type]


def test_band_normalize_takes_numpy_and_torch_vectors() -> None:
    want = BandNormalize(mean=[1.0, 2.5], std=[1.0, 2.0])
    assert BandNormalize(mean=np.array([1.0, 2.5]), std=torch.tensor([1.0, 2.0])) == want
    assert BandNormalize(mean=(np.float32(1.0), 2.5), std=[1, 2]) == want
