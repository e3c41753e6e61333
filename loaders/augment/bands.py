"""Arrays of any band count on the device: the crop rule ``array`` and a per-band normalise.

* :func:`crop_arrays` (loader rule ``array``): crop, flip and resize ``[B, H, W, C]`` stored
  arrays to ``[B, C, h, w]`` with the map the image rule uses
  (:mod:`loaders.augment.resample`): output pixel ``j`` of a box of width ``w`` samples the
  stored position ``left + j * (w - 1) / (ow - 1)`` (the box centre when ``ow == 1``),
  bilinear between the two nearest stored pixels of the box (never outside it: no letterbox
  fill is read), mirrored under a flip. No antialiasing, as for images. Positions are
  float64; values are blended in float32 for dtypes that float32 holds exactly (``uint8``,
  ``int8``, ``(u)int16``, ``float16``, ``bfloat16``, ``float32``) and in float64 otherwise,
  and come back in that dtype: a crop at the stored size returns the stored values exactly.
* :func:`normalize_bands`: ``(x - mean[c]) / std[c]`` per band, in the output dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError

__all__ = ["compute_dtype", "crop_arrays", "normalize_bands"]

_WIDE = (torch.float64, torch.int32, torch.int64, torch.uint32, torch.uint64)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for dtypes float32 cannot hold exactly, float32 otherwise."""
    return torch.float64 if dtype in _WIDE else torch.float32


def _taps(
    start: torch.Tensor, length: torch.Tensor, n: int, flip: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per sample ``[B, n]``: lower and upper stored index and the weight of the upper one."""
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
    """``low * (1 - w) + high * w`` in ``low``'s dtype: exactly ``low`` where ``w == 0``."""
    w = weight.to(low.dtype)
    return low * (1 - w) + high * w


def crop_arrays(
    values: torch.Tensor, crops: CropParams, size: tuple[int, int], options: Any = None
) -> torch.Tensor:
    """Crop, flip and resize ``[B, H, W, C]`` arrays to ``[B, C, *size]`` (bilinear).

    Returns:
        ``[B, C, height, width]`` of :func:`compute_dtype` of ``values``' dtype.
    """
    if values.ndim != 4:
        raise AugmentError(f"arrays must be [B, H, W, C], got shape {tuple(values.shape)}")
    dt = compute_dtype(values.dtype)
    r0, r1, fy = _taps(crops.top, crops.height, size[0], None)
    c0, c1, fx = _taps(crops.left, crops.width, size[1], crops.flip)
    b = torch.arange(values.shape[0], device=values.device)[:, None]
    rows = _blend(values[b, r0].to(dt), values[b, r1].to(dt), fy[:, :, None, None])  # [B, h, W, C]
    i = torch.arange(size[0], device=values.device)[None, :, None]
    b = b[:, :, None]
    out = _blend(rows[b, i, c0[:, None, :]], rows[b, i, c1[:, None, :]], fx[:, None, :, None])
    return out.permute(0, 3, 1, 2)


def normalize_bands(
    x: torch.Tensor,
    mean: Sequence[float] | torch.Tensor,
    std: Sequence[float] | torch.Tensor,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``(x - mean[c]) / std[c]`` for ``[B, C, H, W]`` ``x``, returned in ``dtype``.

    Computed in float64 for a float64 output, in float32 otherwise. ``std`` given on the host
    (a list, a CPU tensor) is checked there; one already on the device is not (no sync).

    Raises:
        AugmentError: ``mean``/``std`` of another length than ``C``, a ``std`` that is not
            positive and finite, or a ``dtype`` that is not floating point.
    """
    if not dtype.is_floating_point:
        raise AugmentError(f"normalize_bands needs a floating output dtype, got {dtype}")
    c = x.shape[1]
    dt = torch.float64 if dtype == torch.float64 else torch.float32
    m = torch.as_tensor(mean, dtype=dt).flatten()
    s = torch.as_tensor(std, dtype=dt).flatten()
    if m.numel() != c or s.numel() != c:
        raise AugmentError(
            f"mean has {m.numel()} and std {s.numel()} values for {c} bands; give one per band"
        )
    if s.device.type == "cpu" and not bool(torch.isfinite(s).all() & (s > 0).all()):
        raise AugmentError(f"std must be positive and finite per band, got {s.tolist()}")
    m, s = m.to(x.device, non_blocking=True), s.to(x.device, non_blocking=True)
    return ((x.to(dt) - m[:, None, None]) / s[:, None, None]).to(dtype)
