"""The straightforward array crop and band normalise that ``loaders.augment.arrays.bands`` replaced.

Kept as the reference its tests compare with: multi-tensor advanced indexing per tap and
``low * (1 - w) + high * w`` blends, rows then columns, in the compute dtype; the normalise as
``(x - mean) / std`` in float32 (float64 for a float64 output). Slow, and obviously right.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from loaders.augment.arrays.bands import compute_dtype
from loaders.augment.crop import CropParams
from loaders.augment.indexing import take_index

__all__ = ["reference_crop", "reference_normalize"]


def _taps(
    start: torch.Tensor, length: torch.Tensor, n: int, flip: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    start, length = start.long()[:, None], length.long()[:, None]
    j = torch.arange(n, device=start.device, dtype=torch.float64)[None, :]
    if n == 1:
        pos = start + (length - 1) / 2.0
    else:
        pos = start + j * ((length - 1).to(torch.float64) / (n - 1))
    if flip is not None:
        pos = torch.where(flip[:, None] > 0, pos.flip(1), pos)
    low = pos.floor().long().clamp(min=start, max=start + length - 1)
    high = (low + 1).clamp(max=start + length - 1)
    return low, high, (pos - low).clamp(0.0, 1.0)


def _blend(low: torch.Tensor, high: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    w = weight.to(low.dtype)
    return low * (1 - w) + high * w


def reference_crop(values: torch.Tensor, crops: CropParams, size: tuple[int, int]) -> torch.Tensor:
    """``[B, H, W, C]`` -> ``[B, C, *size]`` in :func:`compute_dtype`, the slow way."""
    dt = compute_dtype(values.dtype)
    r0, r1, fy = _taps(crops.top, crops.height, size[0], None)
    c0, c1, fx = _taps(crops.left, crops.width, size[1], crops.flip)
    b = torch.arange(values.shape[0], device=values.device)[:, None]
    rows = _blend(
        take_index(values, (b, r0)).to(dt), take_index(values, (b, r1)).to(dt), fy[:, :, None, None]
    )
    i = torch.arange(size[0], device=values.device)[None, :, None]
    b = b[:, :, None]
    out = _blend(rows[b, i, c0[:, None, :]], rows[b, i, c1[:, None, :]], fx[:, None, :, None])
    return out.permute(0, 3, 1, 2)


def reference_normalize(
    x: torch.Tensor, mean: Sequence[float], std: Sequence[float], dtype: torch.dtype
) -> torch.Tensor:
    """``(x - mean[c]) / std[c]`` in float32 (float64 for a float64 ``dtype``), then ``dtype``."""
    dt = torch.float64 if dtype == torch.float64 else torch.float32
    m = torch.as_tensor(mean, dtype=dt, device=x.device)[:, None, None]
    s = torch.as_tensor(std, dtype=dt, device=x.device)[:, None, None]
    return ((x.to(dt) - m) / s).to(dtype)
