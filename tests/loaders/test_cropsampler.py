"""One augmentation policy: the offline variants, the torch ops and DALI draw the same boxes.

The crop sampler (precompute.cropsampler) is keyed by an integer; for the same key and geometry the
three backends must return identical crop boxes, flips and colour factors, and each backend's
pixels must follow its box (checked on images whose pixels encode their own coordinates).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from loaders.augment import ColorJitter, HorizontalFlip, RandomResizedCrop, TrainAugment
from loaders.batching.order import batch_seed
from loaders.dali.params import DaliAugment, batch_params, draw_batch_params
from loaders.dali.policy import from_policy
from precompute.pipeline.writer import write_store_from_arrays
from precompute.spec import AugmentPolicy, BuildSpec
from precompute.stages.augment import augment_variant, variant_key, variant_params
from tests.contracts.loader_contract import collect

SCALE, RATIO, JITTER = (0.2, 0.9), (0.6, 1.6), (0.1, 0.2, 0.3)
S = 32  # stored side; pixel (y, x) holds (8 y, 8 x, 0): every value fits in uint8
# letterboxed (top, left, h, w) extents of various shapes, and the full image
EXTENTS = [(0, 0, S, S), (6, 0, 20, S), (0, 9, S, 14), (3, 5, 25, 21)]


def _torch_policy(flip: float) -> TrainAugment:
    return TrainAugment(
        size=12,
        crop=RandomResizedCrop(scale=SCALE, ratio=RATIO),
        flip=HorizontalFlip(flip),
        jitter=ColorJitter(*JITTER),
        normalize=None,
    )


def _torch_draw(
    extents: np.ndarray, key: int, flip: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes (top, left, h, w), flips and factors the torch path draws from ``key``."""
    gen = torch.Generator().manual_seed(key)
    crops, factors = _torch_policy(flip).params(torch.from_numpy(extents), gen)
    box = torch.stack(list(crops[:4]), 1).numpy()
    assert factors is not None
    return box, crops.flip.numpy().astype(bool), factors.numpy()


def _dali_draw(
    extents: np.ndarray, key: int, flip: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    aug = from_policy(_torch_policy(flip))
    p = batch_params(aug, extents[:, 2:], key, offset=extents[:, :2])
    box = np.concatenate([p.roi_start, p.roi_end - p.roi_start], axis=1)
    return box, p.mirror.astype(bool), np.stack([p.brightness, p.contrast, p.saturation], 1)


def _coords(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([8 * yy, 8 * xx, np.zeros_like(yy)], -1).astype(np.uint8)


def test_torch_and_dali_draw_identical_batches_for_the_same_key() -> None:
    extents = np.array([EXTENTS[i % 4] for i in range(256)], dtype=np.int32)
    for key in (0, 7, 2**40 + 3, 2**64 - 1):  # any torch.Generator seed
        t_box, t_flip, t_f = _torch_draw(extents, key)
        d_box, d_flip, d_f = _dali_draw(extents, key)
        np.testing.assert_array_equal(t_box, d_box)
        np.testing.assert_array_equal(t_flip, d_flip)
        np.testing.assert_array_equal(t_f, d_f)
        assert 0.3 < t_flip.mean() < 0.7 and len({tuple(b) for b in t_box}) > 200


def test_offline_variants_draw_the_same_box_as_the_loaders() -> None:
    policy = AugmentPolicy(
        scale=SCALE, ratio=RATIO, brightness=JITTER[0], contrast=JITTER[1], saturation=JITTER[2]
    )
    for i, (h, w) in enumerate([(32, 32), (40, 90), (120, 30), (7, 300)] * 10):
        key = variant_key(5, i, i % 3)
        (left, top, right, bottom), factors = variant_params(key, w, h, policy)
        extents = np.array([[0, 0, h, w]], dtype=np.int32)
        for box, _, f in (_torch_draw(extents, key, 0.0), _dali_draw(extents, key, 0.0)):
            assert box[0].tolist() == [top, left, bottom - top, right - left]
            np.testing.assert_array_equal(f[0], factors)


def test_the_loaders_draw_the_same_boxes_at_the_same_batch_position() -> None:
    extents = np.array(EXTENTS * 4, dtype=np.int32)
    for epoch, batch in ((0, 0), (3, 17)):
        gen_key = batch_seed(11, epoch, 1, batch)  # what StoreLoader seeds its generator with
        t_box, t_flip, _ = _torch_draw(extents, gen_key)
        p = draw_batch_params(
            from_policy(_torch_policy(0.5)),
            extents[:, 2:],
            seed=11,
            epoch=epoch,
            rank=1,
            batch=batch,
            offset=extents[:, :2],
        )
        np.testing.assert_array_equal(t_box[:, :2], p.roi_start)
        np.testing.assert_array_equal(t_box[:, :2] + t_box[:, 2:], p.roi_end)
        np.testing.assert_array_equal(t_flip, p.mirror.astype(bool))


def test_a_generator_moves_on_after_a_draw() -> None:
    extents = np.array(EXTENTS * 8, dtype=np.int32)
    gen = torch.Generator().manual_seed(3)
    aug = _torch_policy(0.5)
    first = aug.params(torch.from_numpy(extents), gen)[0]
    second = aug.params(torch.from_numpy(extents), gen)[0]
    assert not torch.equal(first.top, second.top)  # a reused generator gives fresh boxes
    again = aug.params(torch.from_numpy(extents), torch.Generator().manual_seed(3))[0]
    assert torch.equal(first.top, again.top)


@pytest.mark.parametrize("path", ["fast", "grid"])
def test_torch_pixels_follow_their_box(path: str) -> None:
    extents = np.array(EXTENTS * 4, dtype=np.int32)
    images = torch.from_numpy(np.stack([_coords(S, S)] * len(extents)))
    aug = TrainAugment(
        size=(10, 14), crop=RandomResizedCrop(scale=SCALE, ratio=RATIO), normalize=None, path=path
    )
    out = aug(images, torch.from_numpy(extents), torch.Generator().manual_seed(9)) * 255 / 8
    crops, _ = aug.params(torch.from_numpy(extents), torch.Generator().manual_seed(9))
    box, flip = torch.stack(list(crops[:4]), 1).numpy(), crops.flip.numpy()
    assert 0 < flip.sum() < len(flip)
    for k, (top, left, h, w) in enumerate(box):
        y, x = out[k, 0].numpy(), out[k, 1].numpy()
        first, last = (left + w - 1, left) if flip[k] else (left, left + w - 1)
        # first and last output pixel centres sit on the box's first and last pixel centres
        np.testing.assert_allclose([y[0, 0], y[-1, -1]], [top, top + h - 1], atol=0.07)
        np.testing.assert_allclose([x[0, 0], x[-1, -1]], [first, last], atol=0.07)


def test_offline_pixels_follow_their_box() -> None:
    policy = AugmentPolicy(scale=SCALE, ratio=RATIO, brightness=0.0, contrast=0.0, saturation=0.0)
    img = Image.fromarray(_coords(30, 31))
    for slot in range(20):
        out = augment_variant(img, 12, policy, seed=4, slot=slot, variant=1) / 8
        (left, top, right, bottom), _ = variant_params(variant_key(4, slot, 1), 31, 30, policy)
        # Pillow maps pixel centres: output j samples top + (j + 0.5) h / 12 - 0.5
        want_y = top + (np.arange(12) + 0.5) * (bottom - top) / 12 - 0.5
        want_x = left + (np.arange(12) + 0.5) * (right - left) / 12 - 0.5
        np.testing.assert_allclose(out[:, 6, 0], want_y, atol=0.4)
        np.testing.assert_allclose(out[6, :, 1], want_x, atol=0.4)


@pytest.fixture(scope="module")
def coords_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A letterboxed store whose every pixel (y, x) holds (8 y, 8 x, 0)."""
    n = 32
    extents = np.array([EXTENTS[i % 4] for i in range(n)], dtype=np.int32)
    images = np.stack([_coords(S, S)] * n)
    path = tmp_path_factory.mktemp("coords") / "s"
    write_store_from_arrays(
        path,
        images,
        np.arange(n) % 3,
        BuildSpec(size=S, mode="letterbox", chunk_samples=4, shard_samples=8),
        extents=extents,
    )
    return path


@pytest.mark.dali
def test_dali_pixels_follow_the_box_the_torch_path_draws(coords_store: Path) -> None:
    from loaders.dali import DaliStoreLoader

    aug = DaliAugment(
        size=12,
        scale=SCALE,
        ratio=RATIO,
        flip=0.5,
        dtype="uint8",
        layout="HWC",
        mean=(0, 0, 0),
        std=(1, 1, 1),
    )
    loader = DaliStoreLoader(coords_store, 8, augment=aug, device="cpu", seed=3)
    extents = np.array([EXTENTS[i % 4] for i in range(32)], dtype=np.int32)
    for b, batch in enumerate(collect(loader)):
        ext = extents[batch["index"]]
        box, flip, _ = _torch_draw(ext, batch_seed(3, 0, 0, b))
        for k, (top, left, h, w) in enumerate(box):
            y, x = batch["image"][k, ..., 0] / 8, batch["image"][k, ..., 1] / 8
            # DALI maps pixel centres too: output j samples left + (j + 0.5) w / 12 - 0.5
            want_x = left + (np.arange(12) + 0.5) * w / 12 - 0.5
            want_y = top + (np.arange(12) + 0.5) * h / 12 - 0.5
            np.testing.assert_allclose(x[6], want_x[::-1] if flip[k] else want_x, atol=0.4)
            np.testing.assert_allclose(y[:, 6], want_y, atol=0.4)


@pytest.mark.gpu
def test_cuda_boxes_equal_host_boxes() -> None:
    extents = torch.tensor(EXTENTS * 64, dtype=torch.int32)
    aug = _torch_policy(0.5)
    cpu, f_cpu = aug.params(extents, torch.Generator().manual_seed(5))
    cuda, f_cuda = aug.params(extents.cuda(), torch.Generator(device="cuda").manual_seed(5))
    for a, b in zip(cpu, cuda, strict=True):
        assert torch.equal(a, b.cpu())
    assert f_cpu is not None and f_cuda is not None and torch.equal(f_cpu, f_cuda.cpu())


def test_a_build_spec_builds_its_box_policy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``variant_params`` runs per sample and variant; the sampler's Policy is built once per
    spec and every draw is the one a freshly built Policy gives."""
    import precompute.spec as spec_module

    built = []
    real = spec_module.Policy

    def counted(*args: object, **kwargs: object) -> object:
        built.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(spec_module, "Policy", counted)
    policy = AugmentPolicy(scale=(0.3, 0.9), brightness=0.2)
    draws = [variant_params(variant_key(7, slot, 0), 40, 30, policy) for slot in range(50)]
    assert len(built) == 1
    fresh = [variant_params(variant_key(7, s, 0), 40, 30, AugmentPolicy(scale=(0.3, 0.9),
             brightness=0.2)) for s in range(50)]  # fmt: skip
    assert [d[0] for d in draws] == [f[0] for f in fresh]
    np.testing.assert_array_equal(np.stack([d[1] for d in draws]), np.stack([f[1] for f in fresh]))
