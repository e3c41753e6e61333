"""One loaders.augment policy configures the DALI loaders too; dtype and memory format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from loaders.augment import CenterCrop, ColorJitter, EvalAugment, HorizontalFlip, TrainAugment
from loaders.augment.image.ops import Normalize, RandomResizedCrop
from loaders.dali.params import DaliAugment, draw_batch_params
from loaders.dali.policy import as_dali_augment, from_policy
from precompute.policy import Policy
from tests.contracts.loader_contract import collect, make_index_store


def test_train_policy_translates_field_by_field() -> None:
    policy = TrainAugment(
        size=32,
        crop=RandomResizedCrop(scale=(0.3, 0.9), ratio=(0.5, 2.0), attempts=5),
        flip=HorizontalFlip(p=0.25),
        jitter=ColorJitter(0.1, 0.2, 0.3),
        normalize=Normalize(mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6)),
        dtype="bfloat16",
        channels_last=True,
    )
    got = from_policy(policy)
    assert got == DaliAugment(
        size=32,
        scale=(0.3, 0.9),
        ratio=(0.5, 2.0),
        attempts=5,
        flip=0.25,
        brightness=0.1,
        contrast=0.2,
        saturation=0.3,
        mean=(0.1, 0.2, 0.3),
        std=(0.4, 0.5, 0.6),
        dtype="bfloat16",
        channels_last=True,
    )
    assert from_policy(TrainAugment(size=8, flip=None, normalize=None)).flip == 0.0
    assert from_policy(TrainAugment(size=8, normalize=None)).std == (1.0, 1.0, 1.0)


def test_eval_policy_is_a_centre_crop() -> None:
    got = from_policy(EvalAugment(size=16, crop=CenterCrop(fraction=0.5)))
    assert got.center == 0.5 and got.scale is None and got.flip == 0.0
    p = draw_batch_params(got, np.array([[40, 60]]), seed=0, epoch=0, rank=0, batch=0)
    np.testing.assert_array_equal(p.roi_start, [[10, 20]])
    np.testing.assert_array_equal(p.roi_end, [[30, 40]])


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="square"):
        from_policy(TrainAugment(size=(16, 32)))
    with pytest.raises(TypeError, match="dict"):
        as_dali_augment({"size": 8})
    with pytest.raises(ValueError, match="center"):
        DaliAugment(center=0.5)  # the default random crop is still on
    with pytest.raises(ValueError, match="flip"):
        DaliAugment(flip=1.5)


def test_random_resized_crop_boxes_respect_the_policy() -> None:
    aug = DaliAugment(size=8, scale=(0.2, 0.5), ratio=(0.75, 1.333))
    hw = np.tile([[100, 80]], (500, 1))
    p = draw_batch_params(aug, hw, seed=1, epoch=2, rank=0, batch=3)
    h, w = (p.roi_end - p.roi_start).T
    assert (p.roi_start >= 0).all() and (p.roi_end[:, 0] <= 100).all()
    assert (p.roi_end[:, 1] <= 80).all()
    area = h * w / 8000
    assert area.min() > 0.18 and area.max() < 0.53  # scale range, up to rounding
    assert (w / h).min() > 0.7 and (w / h).max() < 1.4
    again = draw_batch_params(aug, hw, seed=1, epoch=2, rank=0, batch=3)
    np.testing.assert_array_equal(p.roi_start, again.roi_start)
    other = draw_batch_params(aug, hw, seed=1, epoch=2, rank=0, batch=4)
    assert not np.array_equal(p.roi_start, other.roi_start)


@pytest.mark.dali
def test_loader_takes_a_train_policy_with_bfloat16_channels_last(tmp_path: Path) -> None:
    from loaders.dali import DaliStoreLoader

    path = make_index_store(tmp_path / "s", 32, size=24)
    policy = TrainAugment(size=16, dtype="bfloat16", channels_last=True)
    batch = next(iter(DaliStoreLoader(path, 8, augment=policy, device="cpu")))
    image = batch["image"]
    assert image.shape == (8, 3, 16, 16) and image.dtype == torch.bfloat16
    assert image.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.dali
def test_loader_takes_an_eval_policy(tmp_path: Path) -> None:
    from loaders.dali import DaliStoreLoader

    path = make_index_store(tmp_path / "s", 32, size=24)
    policy = EvalAugment(size=12, normalize=None)
    loader = DaliStoreLoader(path, 8, augment=policy, device="cpu", shuffle=False)
    for batch in loader:
        want = (batch["index"] % 256).to(torch.float32) / 255
        torch.testing.assert_close(batch["image"][:, 0, 6, 6], want)


class _TrainRebuilt(TrainAugment):
    """The same policy with its box-sampler ``Policy`` built on every access (the old way)."""

    @property  # type: ignore[override]
    def policy(self) -> Policy:
        return TrainAugment.policy.func(self)  # type: ignore[attr-defined]


class _DaliRebuilt(DaliAugment):
    """As :class:`_TrainRebuilt`, for the DALI loader's policy."""

    @property  # type: ignore[override]
    def policy(self) -> Policy:
        return DaliAugment.policy.func(self)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["StoreLoader", "DaliStoreLoader"])
def test_a_loader_builds_its_policy_once_and_serves_the_same_bytes(
    tmp_path: Path, built_policies: list[Policy], kind: str
) -> None:
    from loaders import StoreLoader
    from loaders.dali import DaliStoreLoader

    path = make_index_store(tmp_path / "s", 64)
    loader: type[StoreLoader] | type[DaliStoreLoader]
    if kind == "StoreLoader":
        loader, aug, rebuilt = StoreLoader, TrainAugment, _TrainRebuilt
        spec: dict[str, object] = {"jitter": ColorJitter(0.3, 0.2, 0.1), "flip": HorizontalFlip()}
    else:
        loader, aug, rebuilt = DaliStoreLoader, DaliAugment, _DaliRebuilt
        spec = {"brightness": 0.3, "contrast": 0.2, "saturation": 0.1}
    kw = {"batch_size": 8, "seed": 3, "device": "cpu"}
    got = collect(loader(path, augment=aug(size=12, **spec), **kw))  # type: ignore[arg-type]
    assert len(got) == 8 and len(built_policies) == 1  # not one per batch
    want = collect(loader(path, augment=rebuilt(size=12, **spec), **kw))  # type: ignore[arg-type]
    assert len(built_policies) == 1 + len(want)  # the reference rebuilds it for every batch
    for g, w in zip(got, want, strict=True):
        assert g["image"].tobytes() == w["image"].tobytes()
