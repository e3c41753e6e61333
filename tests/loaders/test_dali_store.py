"""DaliStoreLoader: augmentation served by DALI equals its reference, and resumes exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from loaders.errors import LoaderError
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import BuildSpec
from tests.contracts.loader_contract import collect, make_index_store

pytestmark = pytest.mark.dali

S = 24


@pytest.fixture(scope="module")
def smooth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A store of smooth, asymmetric images (small resampling error, flips are visible)."""
    n = 40
    yy, xx = np.mgrid[0:S, 0:S]
    images = np.zeros((n, S, S, 3), np.uint8)
    for i in range(n):
        images[i, ..., 0] = xx * 10 + i
        images[i, ..., 1] = yy * 10
        images[i, ..., 2] = (xx + yy) * 5
    path = tmp_path_factory.mktemp("smooth") / "s"
    write_store_from_arrays(
        path, images, np.arange(n) % 3, BuildSpec(size=S, chunk_samples=4, shard_samples=8)
    )
    return path, images


def _loader(path: Path, **kw: Any) -> Any:
    from loaders.dali import DaliStoreLoader

    return DaliStoreLoader(path, **{"batch_size": 8, "device": "cpu", "seed": 1, **kw})


def test_crop_and_flip_match_their_reference(smooth: tuple[Path, np.ndarray]) -> None:
    from loaders.dali import DaliAugment
    from loaders.dali.params import draw_batch_params

    path, images = smooth
    aug = DaliAugment(
        size=12,
        scale=(0.2, 0.7),
        flip=True,
        dtype="uint8",
        layout="HWC",
        mean=(0, 0, 0),
        std=(1, 1, 1),
    )
    loader = _loader(path, augment=aug, shuffle=False)
    flips = 0
    for b, batch in enumerate(collect(loader)):
        hw = np.full((len(batch["index"]), 2), S)
        p = draw_batch_params(aug, hw, seed=1, epoch=0, rank=0, batch=b)
        flips += int(p.mirror.sum())
        for k, i in enumerate(batch["index"]):
            (y0, x0), (y1, x1) = p.roi_start[k].astype(int), p.roi_end[k].astype(int)
            ref = Image.fromarray(images[i]).crop((x0, y0, x1, y1)).resize((12, 12), Image.BILINEAR)
            ref = np.asarray(ref, np.int64)[:, ::-1] if p.mirror[k] else np.asarray(ref, np.int64)
            assert np.abs(batch["image"][k].astype(np.int64) - ref).mean() < 2.0
    assert 0 < flips < 40


def test_normalise_and_layout(smooth: tuple[Path, np.ndarray]) -> None:
    from loaders.dali import DaliAugment

    path, images = smooth
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    aug = DaliAugment(size=None, scale=None, flip=False, mean=mean, std=std)
    (batch,) = collect(_loader(path, augment=aug, shuffle=False, batch_size=40))
    assert batch["image"].shape == (40, 3, S, S) and batch["image"].dtype == np.float32
    want = (images.transpose(0, 3, 1, 2) / 255.0 - np.reshape(mean, (1, 3, 1, 1))) / np.reshape(
        std, (1, 3, 1, 1)
    )
    np.testing.assert_allclose(batch["image"], want, atol=1e-4)


def test_brightness_factor_is_applied_per_sample(smooth: tuple[Path, np.ndarray]) -> None:
    from loaders.dali import DaliAugment
    from loaders.dali.params import draw_batch_params

    path, images = smooth
    aug = DaliAugment(
        size=None,
        scale=None,
        flip=False,
        brightness=0.5,
        dtype="uint8",
        layout="HWC",
        mean=(0, 0, 0),
        std=(1, 1, 1),
    )
    for b, batch in enumerate(collect(_loader(path, augment=aug, shuffle=False))):
        p = draw_batch_params(aug, np.full((8, 2), S), seed=1, epoch=0, rank=0, batch=b)
        want = np.clip(images[batch["index"]] * p.brightness[:, None, None, None], 0, 255)
        assert np.abs(batch["image"].astype(np.float64) - want).max() <= 1.0
        assert len(set(np.round(p.brightness, 3))) > 1


def _augmented(path: Path, **kw: Any) -> Any:
    from loaders.dali import DaliAugment

    aug = DaliAugment(size=16, brightness=0.3, contrast=0.3, saturation=0.3)
    return _loader(path, augment=aug, rank=1, world_size=2, **kw)


@pytest.mark.parametrize("mix", [False, True])
def test_augmented_resume_is_exact(smooth: tuple[Path, np.ndarray], mix: bool) -> None:
    from loaders.augment import Mixup

    path, _ = smooth
    mixup = Mixup(num_classes=3) if mix else None
    full = _augmented(path, mixup=mixup)
    full.set_epoch(3)
    want = collect(full)
    head_loader = _augmented(path, mixup=mixup)
    head_loader.set_epoch(3)
    head = collect(head_loader, limit=1)
    resumed = _augmented(path, mixup=mixup)
    resumed.load_state_dict(head_loader.state_dict())
    got = head + collect(resumed)
    assert len(got) == len(want) == 2
    key = "label" if mixup is None else "target"
    for g, w in zip(got, want, strict=True):
        assert g["image"].shape == (8, 3, 16, 16) and key in g
        np.testing.assert_array_equal(g["image"], w["image"])
        np.testing.assert_array_equal(g[key], w[key])
        if mix:
            assert g[key].shape == (8, 3)
            np.testing.assert_allclose(g[key].sum(1), 1.0, rtol=1e-5)


def test_augmentation_differs_by_epoch_and_repeats_by_seed(smooth: tuple[Path, np.ndarray]) -> None:
    path, _ = smooth
    runs = []
    for epoch in (0, 0, 1):
        loader = _augmented(path, shuffle=False)
        loader.set_epoch(epoch)
        runs.append(collect(loader, limit=1)[0]["image"])
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_letterbox_crops_stay_inside_the_extent(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment

    n = 16
    images = np.full((n, S, S, 3), 255, np.uint8)
    images[:, 6:18, :, :] = 10  # valid region: rows 6..17, the rest is fill
    extents = np.tile(np.array([6, 0, 12, S], np.int32), (n, 1))
    write_store_from_arrays(
        tmp_path / "lb",
        images,
        np.zeros(n),
        extents=extents,
        spec=BuildSpec(size=S, mode="letterbox", chunk_samples=4, shard_samples=8, fill=255),
    )
    aug = DaliAugment(size=8, scale=(0.1, 1.0), dtype="uint8", layout="HWC")
    for batch in collect(_loader(tmp_path / "lb", augment=aug)):
        assert (batch["image"] == 10).all()  # fill (255) never leaks into a crop


def test_state_of_another_loader_is_refused(tmp_path: Path) -> None:
    path = make_index_store(tmp_path / "s", 40)
    state = _loader(path, seed=1).state_dict()
    with pytest.raises(LoaderError, match="seed"):
        _loader(path, seed=2).load_state_dict(state)


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment

    path = make_index_store(tmp_path / "s", 8)
    with pytest.raises(ValueError, match="batch_size"):
        _loader(path, batch_size=0)
    with pytest.raises(ValueError, match="scale"):
        DaliAugment(scale=(0.9, 0.1))
    with pytest.raises(ValueError, match="dtype"):
        DaliAugment(dtype="int8")
    with pytest.raises(ValueError, match="cuda"):
        _loader(path, device="cuda:0") if not torch.cuda.is_available() else _loader(
            path, device="mps"
        )


def test_every_epoch_yields_with_one_loader(tmp_path: Path) -> None:
    from loaders.dali import DaliAugment

    path = make_index_store(tmp_path / "s", 40)
    loader = _loader(path, augment=DaliAugment(size=8), drop_last=False)
    epochs = [np.concatenate([b["index"] for b in collect(loader)]) for _ in range(3)]
    assert [sorted(e.tolist()) for e in epochs] == [list(range(40))] * 3
    assert loader.epoch == 3 and not np.array_equal(epochs[0], epochs[1])


def test_the_store_loaders_choice_of_samples_is_served_alike(tmp_path: Path) -> None:
    from loaders import StoreLoader

    path = make_index_store(tmp_path / "s", 120, holes=(4, 50))
    kw: dict[str, Any] = {"seed": 3, "balance": "label", "subset": lambda s: s["label"] < 5}
    dali = np.concatenate([b["index"] for b in collect(_loader(path, batch_size=8, **kw))])
    want = np.concatenate([b["index"] for b in collect(StoreLoader(path, 8, **kw))])
    np.testing.assert_array_equal(dali, want)
    assert set((want % 7).tolist()) <= set(range(5)) and len(np.unique(want)) < len(want)
    with pytest.raises(TypeError, match="serves one store; a mixture"):
        _loader([path, path], batch_size=8)
