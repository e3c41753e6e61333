"""Reused output batches of the CPU fast path: reused only when nothing refers to them."""

from __future__ import annotations

import pytest
import torch

from loaders.augment import TrainAugment
from loaders.augment.outbuf import output_batch


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def test_a_dropped_batch_is_reused_and_a_kept_one_never() -> None:
    first = output_batch(4, (8, 8), torch.float32, False)
    where = _ptr(first)
    first.fill_(7)
    view = first[1:3, 0]  # a view keeps the buffer in use
    del first
    second = output_batch(4, (8, 8), torch.float32, False)
    assert _ptr(second) != where
    assert bool((view == 7).all())
    del view, second
    assert _ptr(output_batch(4, (8, 8), torch.float32, False)) == where  # free again: reused


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_shape_dtype_and_memory_format(dtype: torch.dtype, channels_last: bool) -> None:
    out = output_batch(3, (5, 6), dtype, channels_last)
    assert out.shape == (3, 3, 5, 6) and out.dtype == dtype
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert out.is_contiguous(memory_format=fmt)


def test_augment_outputs_kept_by_the_caller_stay_intact() -> None:
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, 20, 20, 3), dtype=torch.uint8)
    extents = torch.tensor([[0, 0, 20, 20]] * 6, dtype=torch.int32)
    aug = TrainAugment(size=(12, 12), threads=1)
    kept = [aug(images, extents, gen) for _ in range(5)]  # more than the pool keeps
    copies = [k.clone() for k in kept]
    for _ in range(5):
        aug(images, extents, gen)  # dropped at once: their buffers may be reused
    assert len({_ptr(k) for k in kept}) == 5
    for k, c in zip(kept, copies, strict=True):
        assert torch.equal(k, c)
