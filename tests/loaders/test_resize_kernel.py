"""The CPU fast path's resize kernel: the private out= kernel where it works, else the same."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from loaders.augment.image import resample


def test_this_torch_has_the_out_kernel() -> None:
    # torch 2.11 and 2.13 (the versions the loaders support) both pass the probe
    assert resample._upsample is torch._C._nn.upsample_bilinear2d


@pytest.mark.parametrize("size", [(7, 5), (40, 33)])
def test_the_fallback_gives_the_kernels_values(size: tuple[int, int]) -> None:
    x = torch.randint(0, 256, (1, 23, 17, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
    want = torch.empty((1, *size, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
    got = torch.empty_like(want)
    torch._C._nn.upsample_bilinear2d(x, size, True, None, None, out=want)
    resample._interpolate_into(x, size, True, None, None, out=got)
    assert torch.equal(got, want)
    assert torch.equal(want, F.interpolate(x, size, mode="bilinear", align_corners=True))


def test_a_torch_without_the_kernel_gets_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch._C._nn, "upsample_bilinear2d")
    assert resample._out_kernel() is resample._interpolate_into


def test_a_kernel_that_refuses_out_gets_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_out(*args: object) -> torch.Tensor:  # an overload without out=: TypeError
        raise AssertionError("not reached")

    monkeypatch.setattr(torch._C._nn, "upsample_bilinear2d", no_out)
    assert resample._out_kernel() is resample._interpolate_into
