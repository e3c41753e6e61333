"""loaders.augment on CUDA: no host sync, same op count at any batch size, matches the CPU.

Marked ``gpu``: skipped (by tests/conftest.py) where no CUDA device is present.
"""

from __future__ import annotations

import pytest
import torch

from loaders.augment import ColorJitter, EvalAugment, Mixup, TrainAugment, grid_resample

pytestmark = pytest.mark.gpu

S = 32


def _batch(b: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(b)
    images = torch.randint(0, 256, (b, S, S, 3), dtype=torch.uint8, generator=g)
    extents = torch.tensor([[0, 0, S, S], [4, 0, 24, S]] * (b // 2), dtype=torch.int32)
    labels = torch.arange(b) % 5
    return images.to(device), extents.to(device), labels.to(device)


def _run(aug, mix, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    images, extents, labels = _batch(b, "cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    return mix(aug(images, extents, g), labels, g)


AUG = TrainAugment(size=16, jitter=ColorJitter(), dtype="bfloat16", channels_last=True)
MIX = Mixup(num_classes=5)


def test_cuda_path_never_waits_for_the_host():
    _run(AUG, MIX, 64)  # warm-up: allocator and kernel caches
    images, extents, labels = _batch(64, "cuda")  # host-to-device copies happen before
    g = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises from here on
    try:
        out, soft = MIX(AUG(images, extents, g), labels, g)
        ev = EvalAugment(size=16)(images, extents)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert out.is_cuda and out.dtype == torch.bfloat16 and soft.is_cuda and ev.is_cuda
    assert torch.allclose(soft.sum(1).cpu(), torch.ones(64), atol=1e-5)


def test_cuda_op_count_is_independent_of_batch_size():
    counts = []
    for b in (32, 256):
        _run(AUG, MIX, b)
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as prof:
            _run(AUG, MIX, b)
            torch.cuda.synchronize()
        counts.append(sorted(e.name for e in prof.events() if e.name.startswith("aten::")))
    assert counts[0] == counts[1]


def test_cuda_grid_path_matches_the_cpu():
    images, extents, _ = _batch(32, "cpu")
    crops, _ = AUG.params(extents, torch.Generator().manual_seed(3))
    cpu = grid_resample(images, crops, (16, 16))
    cuda = grid_resample(images.cuda(), type(crops)(*(c.cuda() for c in crops)), (16, 16))
    torch.testing.assert_close(cuda.cpu(), cpu, atol=1e-3, rtol=1e-4)
