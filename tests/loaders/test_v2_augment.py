"""Invariants of one geometric draw over every field, end to end through ``StoreLoader``.

The store's image encodes each pixel's own coordinates (channel 0: ``16 * row``, channel 1:
``16 * col``), so the bilinear crop of it says, at every output pixel, which stored position
was sampled there. From that alone (not from the loader's draw) the tests check that:

* the mask is the stored mask at the nearest stored pixel of that position (a per-pixel
  function of the served image), holds only values the sample's stored mask holds, and keeps
  its dtype;
* every keypoint lands where the image shows its stored position, visibility lowered to 0
  exactly when it left the crop, ``flip_pairs`` swapped when the image is mirrored;
* CutMix pastes the same box into masks as into images; mixup with a mask field is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.augment import AugmentError, EvalAugment, Mixup, TrainAugment
from loaders.augment.image.ops import CenterCrop, ColorJitter, RandomResizedCrop
from precompute.fields import FieldSpec
from precompute.spec import BuildSpec
from tests.contracts.index_store import collect
from tests.loaders.v2stores import (
    index_fields,
    index_mask,
    index_points,
    write_v2_store,
)

S, N, OUT = 16, 24, (12, 10)
PAIRS = ((0, 2),)


def _extents(n: int) -> np.ndarray:
    idx = np.arange(n)
    top, left = idx % 3, idx % 4
    return np.stack([top, left, S - top - idx % 2, S - left], 1).astype(np.int32)


def _store(root: Path, fields: tuple[FieldSpec, ...]) -> Path:
    idx = np.arange(N)
    rows, cols = np.ogrid[:S, :S]
    image = np.zeros((N, S, S, 3), np.uint8)
    image[..., 0], image[..., 1] = 16 * rows, 16 * cols
    image[..., 2] = idx[:, None, None]
    data = {
        "image": image,
        "mask": index_mask(idx, S),
        "keypoints": index_points(idx, S),
        "label": idx % 7,
    }
    spec = BuildSpec(size=S, chunk_samples=4, shard_samples=8)
    data = {f.name: data[f.name] for f in fields}
    return write_v2_store(root, fields, data, spec, valid=np.ones(N, np.uint8), extents=_extents(N))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("geo") / "s", index_fields(PAIRS))


@pytest.fixture(scope="module")
def seg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("seg") / "s", index_fields()[:2] + index_fields()[3:])


def _train(path: str = "grid", **kw: Any) -> TrainAugment:
    crop = RandomResizedCrop(scale=(0.1, 1.0))
    return TrainAugment(size=OUT, crop=crop, normalize=None, path=path, **kw)


def _positions(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stored (row, col) index position each output pixel sampled, from the image."""
    return image[:, 0] * 255.0 / 16.0, image[:, 1] * 255.0 / 16.0


def _check_mask(b: dict[str, Any], tol: float) -> None:
    pos_y, pos_x = _positions(b["image"])
    ambiguous = (np.abs(pos_y % 1 - 0.5) < tol) | (np.abs(pos_x % 1 - 0.5) < tol)
    rows, cols = np.floor(pos_y + 0.5).astype(int), np.floor(pos_x + 0.5).astype(int)
    stored = index_mask(b["index"], S)
    want = stored[np.arange(len(rows))[:, None, None], rows, cols]
    assert b["mask"].dtype == np.uint8
    np.testing.assert_array_equal(b["mask"][~ambiguous], want[~ambiguous])
    for i, m in enumerate(b["mask"]):
        assert set(np.unique(m).tolist()) <= set(np.unique(stored[i]).tolist())


@pytest.mark.parametrize("path", ["grid", "fast"])
def test_mask_is_the_stored_mask_where_the_image_sampled(store: Path, path: str) -> None:
    loader = StoreLoader(store, 8, seed=4, augment=_train(path))
    tol = 1e-3 if path == "grid" else 0.05  # the fast path's image is uint8-rounded
    batches = collect(loader)
    assert batches
    for b in batches:
        assert b["image"].shape == (8, 3, *OUT) and b["mask"].shape == (8, *OUT)
        _check_mask(b, tol)
    flips = np.concatenate([b["image"][:, 1, 0, 0] > b["image"][:, 1, 0, -1] for b in batches])
    assert flips.any() and not flips.all()  # both kinds of draw were checked


def _box(pos: np.ndarray) -> tuple[float, float, float, int]:
    """(first position, step per output pixel, start, length) along one axis of one sample."""
    a, b = float(pos[0]), float(pos[-1])
    start = round(min(a, b))
    return a, (b - a) / (len(pos) - 1), start, round(max(a, b)) - start + 1


def _expected_points(b: dict[str, Any], i: int) -> np.ndarray:
    """Sample ``i``'s keypoints mapped by the draw the image shows (independent of the loader)."""
    pos_y, pos_x = _positions(b["image"][i : i + 1])
    ay, sy, top, h = _box(pos_y[0, :, 0])
    ax, sx, left, w = _box(pos_x[0, 0, :])
    pts = index_points(b["index"][i : i + 1], S)[0].astype(np.float64)
    x, y, v = pts[:, 0], pts[:, 1], pts[:, 2]
    ox = (x - 0.5 - ax) / sx + 0.5  # where the image sampled the point's position
    oy = (y - 0.5 - ay) / sy + 0.5
    inside = (x >= left) & (x < left + w) & (y >= top) & (y < top + h)
    inside &= (ox >= 0) & (ox < OUT[1]) & (oy >= 0) & (oy < OUT[0])
    out = np.stack([ox, oy, np.where(inside, v, 0.0)], 1)
    if sx < 0:  # mirrored: left and right landmarks trade places
        out[[0, 2]] = out[[2, 0]]
    return out


def test_keypoints_follow_the_draw_the_image_shows(store: Path) -> None:
    checked = hidden = 0
    for b in collect(StoreLoader(store, 8, seed=4, augment=_train())):
        assert b["keypoints"].dtype == np.float32 and b["keypoints"].shape == (8, 3, 3)
        for i in range(8):
            if abs(b["image"][i, 1, 0, 0] - b["image"][i, 1, 0, -1]) < 1e-6:
                continue  # a one-pixel-wide crop: the image shows no direction to map along
            if abs(b["image"][i, 0, 0, 0] - b["image"][i, 0, -1, 0]) < 1e-6:
                continue
            want = _expected_points(b, i)
            np.testing.assert_allclose(b["keypoints"][i], want, atol=1e-3)
            checked += 1
            hidden += int((want[:, 2] == 0).sum())
    assert checked > 10 and hidden > 0  # some points did leave their crops


def test_eval_augment_moves_every_field_by_the_centre_crop(store: Path) -> None:
    aug = EvalAugment(size=OUT, crop=CenterCrop(fraction=0.8), normalize=None, path="grid")
    for b in collect(StoreLoader(store, 8, shuffle=False, augment=aug)):
        _check_mask(b, 1e-3)
        for i in range(8):
            np.testing.assert_allclose(b["keypoints"][i], _expected_points(b, i), atol=1e-3)


def test_photometric_ops_touch_images_only(store: Path) -> None:
    plain = collect(StoreLoader(store, 8, seed=1, augment=_train()))
    jittered = collect(StoreLoader(store, 8, seed=1, augment=_train(jitter=ColorJitter())))
    assert any(
        not np.array_equal(p["image"], j["image"]) for p, j in zip(plain, jittered, strict=True)
    )
    for p, j in zip(plain, jittered, strict=True):
        np.testing.assert_array_equal(p["mask"], j["mask"])
        np.testing.assert_array_equal(p["keypoints"], j["keypoints"])
        np.testing.assert_array_equal(p["label"], j["label"])


def test_resume_mid_epoch_reproduces_augmented_fields(store: Path) -> None:
    kw = {"seed": 9, "augment": _train("fast")}
    want = collect(StoreLoader(store, 4, **kw))
    first = StoreLoader(store, 4, **kw)
    head = collect(first, limit=2)
    resumed = StoreLoader(store, 4, **kw)
    resumed.load_state_dict(first.state_dict())
    for got, exp in zip(head + collect(resumed), want, strict=True):
        for key in exp:
            np.testing.assert_array_equal(got[key], exp[key])


def test_cutmix_pastes_the_same_box_into_masks(seg: Path) -> None:
    cut = Mixup(7, mixup_alpha=0.0, cutmix_alpha=1.0, prob=1.0)
    plain = collect(StoreLoader(seg, 8, seed=2, augment=_train()))
    mixed = collect(StoreLoader(seg, 8, seed=2, augment=_train(), mixup=cut))
    pasted_any = False
    for a, m in zip(plain, mixed, strict=True):
        assert m["mask"].dtype == np.uint8 and m["label"].shape == (8, 7)
        changed = (m["image"] != a["image"]).any(1)  # [B, H, W]: pixels the paste replaced
        np.testing.assert_array_equal(m["mask"][changed], a["mask"][::-1][changed])
        outside = np.ones(changed.shape[1:], bool)
        ys, xs = np.nonzero(changed.any(0))
        if len(ys):
            pasted_any = True
            outside[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1] = False
        np.testing.assert_array_equal(m["mask"][:, outside], a["mask"][:, outside])
        np.testing.assert_allclose(m["label"].sum(1), 1.0, rtol=1e-5)
    assert pasted_any


@pytest.mark.parametrize(
    ("fixture", "mix", "match"),
    [
        ("seg", Mixup(7), r"mixup would blend field 'mask' \(kind mask\).*mixup_alpha=0"),
        ("store", Mixup(7, mixup_alpha=0.0), r"field 'keypoints' \(kind keypoints\) can be"),
        ("seg", Mixup(4, mixup_alpha=0.0), r"field 'label' has 7 classes.*Mixup\(7, \.\.\.\)"),
    ],
)
def test_mixing_a_field_its_kind_refuses_fails_at_construction(
    fixture: str, mix: Mixup, match: str, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(AugmentError, match=match):
        StoreLoader(request.getfixturevalue(fixture), 8, augment=_train(), mixup=mix)


def test_a_plain_image_augment_is_refused_for_a_fields_store(seg: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot serve a store of fields \['image', 'mask'"):
        StoreLoader(seg, 8, augment=lambda images, extents, gen: images)
