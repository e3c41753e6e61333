"""The CPU fast path's shortcuts serve exactly what the plain torch path serves.

The box placement runs in numpy for CPU extents, and each crop is resized straight into a
reused per-thread buffer; both must leave every output bit unchanged. The reference here is
written out step by step: boxes placed with torch ops, ``F.interpolate`` per crop, then the
normalisation formulas of :mod:`loaders.augment.image.color`.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from benchmarks.common import aten_op_counts
from loaders.augment import Normalize, TrainAugment
from loaders.augment.crop import random_crops
from loaders.augment.image.color import channel_affine, normalize_converter
from loaders.augment.image.resample import _resize_one
from loaders.augment.image.threads import pool, scratch
from loaders.augment.outbuf import output_batch
from precompute import cropsampler

S = 48
# full, letterboxed, thin and one-pixel extents: the fallback box is taken too
EXTENTS = [(0, 0, S, S), (6, 0, 30, S), (0, 9, S, 14), (3, 5, 25, 21), (10, 7, 1, 40)]


def _extents(n: int) -> torch.Tensor:
    return torch.tensor([EXTENTS[i % len(EXTENTS)] for i in range(n)], dtype=torch.int32)


def _torch_boxes(extents: torch.Tensor, seed: int, aug: TrainAugment) -> torch.Tensor:
    """The boxes as the device path places them: torch float64 ops on the same draw."""
    d = cropsampler.draw(cropsampler.generator(seed), len(extents), aug.policy)
    t = cropsampler.Draw(*(torch.from_numpy(a) for a in d))
    return cropsampler.random_boxes(extents.double(), t, aug.policy.ratio, xp=torch).long()


@pytest.mark.parametrize("seed", range(6))
def test_cpu_boxes_equal_the_torch_placement(seed: int) -> None:
    aug = TrainAugment(size=16)
    extents = _extents(200)
    crops, factors = random_crops(extents, torch.Generator().manual_seed(seed), aug.policy)
    got = torch.stack([crops.top, crops.left, crops.height, crops.width], 1)
    assert torch.equal(got, _torch_boxes(extents, seed, aug))
    d = cropsampler.draw(cropsampler.generator(seed), len(extents), aug.policy)
    assert torch.equal(crops.flip, torch.from_numpy(d.flip).float())
    assert torch.equal(factors, torch.from_numpy(d.factors))


def test_cpu_box_placement_runs_no_torch_kernels() -> None:
    aug = TrainAugment(size=16)
    extents = _extents(64)
    counts = aten_op_counts(lambda: random_crops(extents, torch.Generator(), aug.policy))
    placement = {"aten::sqrt", "aten::where", "aten::floor", "aten::cumsum", "aten::round"}
    assert not placement & set(counts), counts


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("size", [(16, 16), (40, 24), (1, 7)])
def test_resize_into_the_thread_buffer_equals_interpolate(flip: bool, size: tuple) -> None:
    img = torch.randint(0, 256, (S, S, 3), dtype=torch.uint8, generator=torch.Generator())
    for top, left, h, w in EXTENTS:
        crop = img[top : top + h, left : left + w]
        src = (crop.flip(1) if flip else crop).unsqueeze(0).permute(0, 3, 1, 2)
        want = F.interpolate(src, size=size, mode="bilinear", align_corners=True)[0]
        assert torch.equal(_resize_one(crop, size, flip), want)


def test_resize_reuses_one_buffer_per_thread() -> None:
    img = torch.zeros(S, S, 3, dtype=torch.uint8)

    def two_pointers() -> tuple[int, int]:
        a = _resize_one(img[:20, :30], (16, 16), False).data_ptr()
        b = _resize_one(img[5:, 2:], (16, 16), True).data_ptr()
        return a, b

    here = two_pointers()
    there = pool(1).submit(two_pointers).result()
    assert here[0] == here[1] and there[0] == there[1] and here[0] != there[0]


def _reference(images: torch.Tensor, extents: torch.Tensor, seed: int, aug: TrainAugment):
    """The fast path's float32 result, planar, step by step (old formulas, per sample)."""
    box = _torch_boxes(extents, seed, aug)
    flips = cropsampler.draw(cropsampler.generator(seed), len(extents), aug.policy).flip
    scale, shift = channel_affine(aug.normalize)
    mul, add = torch.tensor(scale).view(3, 1, 1), torch.tensor(shift).view(3, 1, 1)
    planar, fused = [], []
    for i, (top, left, h, w) in enumerate(box.tolist()):
        crop = images[i, top : top + h, left : left + w]
        src = (crop.flip(1) if flips[i] else crop).unsqueeze(0).permute(0, 3, 1, 2)
        x = F.interpolate(src, size=aug.size, mode="bilinear", align_corners=True)[0]
        planar.append(x.float().mul_(mul).add_(add))  # planar float32: mul, then add
        fused.append(torch.addcmul(add, x.float(), mul))  # the other outputs: one fused step
    return torch.stack(planar), torch.stack(fused)


@pytest.mark.parametrize("threads", [1, 2])
def test_fast_path_outputs_equal_the_step_by_step_reference(threads: int) -> None:
    images = torch.randint(0, 256, (12, S, S, 3), dtype=torch.uint8, generator=torch.Generator())
    extents = _extents(12)
    for seed in (3, 4):
        base = TrainAugment(size=(20, 28), threads=threads)
        planar, fused = _reference(images, extents, seed, base)
        for dtype in ("float32", "bfloat16", "float16"):
            for channels_last in (False, True):
                aug = TrainAugment(
                    size=(20, 28), threads=threads, dtype=dtype, channels_last=channels_last
                )
                got = aug(images, extents, torch.Generator().manual_seed(seed))
                want = planar if dtype == "float32" and not channels_last else fused
                assert torch.equal(got, want.to(getattr(torch, dtype))), (dtype, channels_last)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_channels_last_sample_is_normalised_by_one_addcmul_rounded_once(dtype: torch.dtype) -> None:
    """A channels-last sample: one ``addcmul`` in float32 math, rounded once into ``dtype``."""
    norm = Normalize()
    convert = normalize_converter(norm)
    img = torch.randint(0, 256, (2, 20, 28, 3), dtype=torch.uint8, generator=torch.Generator())
    pixels = img.permute(0, 3, 1, 2)  # [3, H, W] with HWC strides, as the resize leaves them
    out = output_batch(2, (20, 28), dtype, channels_last=True)
    convert(pixels[0], 0, out[0])
    counts = aten_op_counts(lambda: convert(pixels[1], 1, out[1]))
    assert counts.get("aten::addcmul") == 1 and "aten::mul_" not in counts, counts
    scale, shift = channel_affine(norm)
    want = torch.addcmul(torch.tensor(shift), img.float(), torch.tensor(scale)).to(dtype)
    assert torch.equal(out, want.permute(0, 3, 1, 2))


def test_scratch_hands_back_the_same_tensor_for_the_same_shape() -> None:
    def calls() -> tuple[torch.Tensor, ...]:
        a = scratch("t", (4, 6), torch.float32)
        b = scratch("t", (4, 6), torch.float32)
        smaller = scratch("t", (2, 3), torch.float32)  # the same memory, another view
        larger = scratch("t", (8, 6), torch.float32)  # grown
        return a, b, smaller, larger

    a, b, smaller, larger = pool(1).submit(calls).result()
    assert a is b and a.shape == (4, 6) and a.is_contiguous()
    assert smaller.data_ptr() == a.data_ptr() and smaller.shape == (2, 3)
    assert larger.shape == (8, 6) and larger.numel() == 48
