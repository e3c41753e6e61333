"""Arrays of any band count on the device: the crop rule ``array`` and a per-band normalise.

* :func:`crop_arrays` (loader rule ``array``): crop, flip and resize ``[B, H, W, C]`` stored
  arrays to ``[B, C, h, w]`` with the map the image rule uses
  (:mod:`loaders.augment.image.resample`): output pixel ``j`` of a box of width ``w`` samples the
  stored position ``left + j * (w - 1) / (ow - 1)`` (the box centre when ``ow == 1``),
  bilinear between the two nearest stored pixels of the box (never outside it: no letterbox
  fill is read), mirrored under a flip. No antialiasing, as for images. Positions are
  float64; values are blended in float32 for dtypes that float32 holds exactly (``uint8``,
  ``int8``, ``(u)int16``, ``float16``, ``bfloat16``, ``float32``) and in float64 otherwise,
  and come back in that dtype: a crop at the stored size returns the stored values exactly.
* :func:`normalize_bands`: ``(x - mean[c]) / std[c]`` per band, as one multiply-add written
  straight into the output dtype and memory format.

Both are a few whole-batch torch ops, alike on CPU and CUDA: no loop over samples, no host
sync. The crop is separable. The two stored rows of every output row are taken with one
``index_select`` each from the batch seen as ``[B * H, W * C]`` rows and blended in place
(``lerp_``: exactly the lower row at weight 0); then the two stored pixels of every output
pixel likewise from that result seen as ``[B * h * W, C]``. Every take copies whole contiguous
rows (a pixel's ``C`` bands at the least). On the CPU the batch-sized tensors come from reused
buffers (:mod:`loaders.augment.bandbuf`), so a batch costs no page faults.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from loaders.augment.bandbuf import Role, empty
from loaders.augment.checks import check_extent_values
from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError

__all__ = ["compute_dtype", "crop_arrays", "normalize_bands"]

_WIDE = (torch.float64, torch.int32, torch.int64, torch.uint32, torch.uint64)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for dtypes float32 cannot hold exactly, float32 otherwise."""
    return torch.float64 if dtype in _WIDE else torch.float32


def _taps(
    start: torch.Tensor, length: torch.Tensor, n: int, flip: torch.Tensor | None, frame: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per sample ``[B, n]``: lower and upper stored index and the weight of the upper one.

    Indices are clamped into ``[0, frame)`` as well, so even a box outside the stored frame
    (not checked on a device: no sync) never reads another sample.
    """
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
    weight = (pos - low).clamp(0.0, 1.0)
    return low.clamp_(0, frame - 1), high.clamp_(0, frame - 1), weight


def _check_boxes(crops: CropParams, height: int, width: int) -> None:
    """Refuse an empty box or one leaving the ``height x width`` frame (host values only)."""
    boxes = torch.stack([crops.top, crops.left, crops.height, crops.width], 1)
    check_extent_values(boxes, height, width, what="crop box", frame="array")


def _take(rows: torch.Tensor, index: torch.Tensor, role: Role) -> torch.Tensor:
    """``rows[index]`` of the 2-D ``rows``, in its compute dtype (reused buffers on CPU)."""
    dt = compute_dtype(rows.dtype)
    shape = (len(index), rows.shape[1])
    raw = empty(shape, rows.dtype, rows.device, role="tmp" if rows.dtype != dt else role)
    torch.index_select(rows, 0, index, out=raw)
    return raw if raw.dtype == dt else empty(shape, dt, raw.device, role=role).copy_(raw)


def _take_blend(
    rows: torch.Tensor, low: torch.Tensor, high: torch.Tensor, weight: torch.Tensor, role: Role
) -> torch.Tensor:
    """``lerp(rows[low], rows[high], weight)``: one output row per entry of ``low``.

    ``low``, ``high`` and ``weight`` are flattened; where ``weight`` is 0 the output row is
    exactly ``rows[low]``. Computed and returned in the compute dtype of ``rows``, in a
    buffer of ``role`` (:func:`~loaders.augment.bandbuf.empty`).
    """
    lo = _take(rows, low.reshape(-1), role)
    hi = _take(rows, high.reshape(-1), "tmp")
    return lo.lerp_(hi, weight.reshape(-1, 1).to(lo.dtype))


def crop_arrays(
    values: torch.Tensor, crops: CropParams, size: tuple[int, int], options: Any = None
) -> torch.Tensor:
    """Crop, flip and resize ``[B, H, W, C]`` arrays to ``[B, C, *size]`` (bilinear).

    Args:
        values: ``[B, H, W, C]`` stored arrays, any real dtype.
        crops: Boxes and flips, one per sample, on ``values``' device.
        size: Output ``(height, width)``.
        options: Unused (the field's options).

    Returns:
        ``[B, C, height, width]`` of :func:`compute_dtype` of ``values``' dtype, with
        channels-last strides (a view of ``[B, height, width, C]``).

    Raises:
        AugmentError: ``values`` is not 4-D; on the CPU, a box that is empty or leaves the
            stored frame (naming the sample and the box).
    """
    if values.ndim != 4:
        raise AugmentError(f"arrays must be [B, H, W, C], got shape {tuple(values.shape)}")
    b, height, width, c = values.shape
    h, w = size
    if values.device.type == "cpu":
        _check_boxes(crops, height, width)
    r0, r1, fy = _taps(crops.top, crops.height, h, None, height)
    c0, c1, fx = _taps(crops.left, crops.width, w, crops.flip, width)
    first = torch.arange(b, device=values.device)[:, None] * height  # [B, 1]: sample's row 0
    flat = values.reshape(b * height, width * c)
    rows = _take_blend(flat, first + r0, first + r1, fy, "tmp")
    first = torch.arange(b * h, device=values.device).view(b, h, 1) * width  # [B, h, 1]
    c0, c1 = first + c0[:, None], first + c1[:, None]  # [B, h, w] rows of [B * h * W, C]
    out = _take_blend(rows.view(b * h * width, c), c0, c1, fx[:, None].expand(b, h, w), "out")
    return out.view(b, h, w, c).permute(0, 3, 1, 2)


def _host(values: Sequence[float] | torch.Tensor) -> tuple[float, ...] | None:
    """``values`` as a flat tuple of floats; None for a tensor on a device (left there)."""
    if isinstance(values, torch.Tensor) and values.device.type != "cpu":
        return None
    return tuple(torch.as_tensor(values, dtype=torch.float64).flatten().tolist())


def _on(x: torch.Tensor, dt: torch.dtype, device: torch.device) -> torch.Tensor:
    return x.to(dt).view(-1, 1, 1).to(device, non_blocking=True)


@functools.lru_cache(maxsize=16)
def _affine_host(
    mean: tuple[float, ...], std: tuple[float, ...], dt: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``1 / std`` and ``-mean / std`` as ``[C, 1, 1]`` ``dt`` on ``device`` (checked once)."""
    s = torch.tensor(std, dtype=torch.float64)
    if not bool(torch.isfinite(s).all() & (s > 0).all()):
        raise AugmentError(f"std must be positive and finite per band, got {list(std)}")
    m = torch.tensor(mean, dtype=torch.float64)
    return _on(1.0 / s, dt, device), _on(-m / s, dt, device)


def _affine(
    mean: Sequence[float] | torch.Tensor,
    std: Sequence[float] | torch.Tensor,
    c: int,
    dt: torch.dtype,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-band scale and shift: host values cached, device tensors used as given (no sync)."""
    hm, hs = _host(mean), _host(std)
    if hm is not None and hs is not None:
        counts = len(hm), len(hs)
    else:
        m = torch.as_tensor(mean, device=device).flatten().to(torch.float64)
        s = torch.as_tensor(std, device=device).flatten().to(torch.float64)
        counts = m.numel(), s.numel()
    if counts != (c, c):
        raise AugmentError(
            f"mean has {counts[0]} and std {counts[1]} values for {c} bands; give one per band"
        )
    if hm is not None and hs is not None:
        return _affine_host(hm, hs, dt, device)
    return _on(1.0 / s, dt, device), _on(-m / s, dt, device)


def normalize_bands(
    x: torch.Tensor,
    mean: Sequence[float] | torch.Tensor,
    std: Sequence[float] | torch.Tensor,
    dtype: torch.dtype = torch.float32,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """``(x - mean[c]) / std[c]`` for ``[B, C, H, W]`` ``x``, in ``dtype`` and ``memory_format``.

    One pass: ``x * (1 / std) + (-mean / std)`` (both made in float64, then held in the
    compute dtype) written straight into a new tensor (a reused buffer on CPU). Computed in
    float64 when ``x`` or the output is float64, in float32 otherwise, and rounded once to
    ``dtype``. ``mean``/``std`` given on the host (lists, CPU tensors) are checked and moved
    to the device once per distinct value (cached); ``std`` already on the device is not
    checked (no sync).

    Raises:
        AugmentError: ``mean``/``std`` of another length than ``C``, a ``std`` that is not
            positive and finite, a ``dtype`` that is not floating point, or a
            ``memory_format`` other than contiguous or channels-last.
    """
    if not dtype.is_floating_point:
        raise AugmentError(f"normalize_bands needs a floating output dtype, got {dtype}")
    if memory_format not in (torch.contiguous_format, torch.channels_last):
        raise AugmentError(
            f"normalize_bands writes torch.contiguous_format or torch.channels_last, "
            f"got {memory_format}"
        )
    dt = torch.float64 if torch.float64 in (dtype, x.dtype) else torch.float32
    scale, shift = _affine(mean, std, x.shape[1], dt, x.device)
    out = empty(tuple(x.shape), dtype, x.device, memory_format)
    return torch.addcmul(shift, x, scale, out=out)
