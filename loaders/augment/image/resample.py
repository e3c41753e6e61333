"""Crop + flip + resize of a uint8 batch: the batched device path and the CPU fast path.

Both functions take the same :class:`~loaders.augment.crop.CropParams` and return ``[B, 3,
H, W]`` float32 pixels in ``[0, 255]`` (the fast path's ``convert`` may instead normalise into
another dtype); they agree up to uint8 rounding of the fast path. Both are
bilinear, without antialiasing, and map the output's first and last pixel centres onto the
crop's first and last pixel centres (``align_corners=True`` inside the box), so no pixel
outside the box, e.g. letterbox fill, is ever read.

* :func:`grid_resample`: one ``affine_grid`` + one ``grid_sample`` for the whole batch; the
  kernel count does not depend on the batch size and nothing waits for the host. It converts
  every stored pixel to float first, which is cheap on a GPU and the wall on a CPU.
* :func:`crop_resample`: CPU only. Each sample's crop is sliced, made contiguous and resized
  with the uint8 bilinear kernel, so only the crop's pixels are ever touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError
from loaders.augment.image.color import Converter
from loaders.augment.image.threads import pool, scratch
from loaders.augment.outbuf import output_batch
from loaders.batching.pools import submit_or_run

__all__ = ["crop_resample", "grid_resample"]


def _interpolate_into(
    x: torch.Tensor, size: tuple[int, int], align: bool, *args: Any, out: torch.Tensor
) -> None:
    """The public equivalent of the ``out=`` kernel: resize, then copy into ``out``."""
    out.copy_(F.interpolate(x, size, mode="bilinear", align_corners=align))


def _out_kernel() -> Callable[..., Any]:
    """The bilinear kernel ``F.interpolate`` runs, with its ``out=`` overload, where it works.

    ``torch._C._nn.upsample_bilinear2d(x, size, align_corners, scale_h, scale_w, out=)`` is
    private (present and the same in torch 2.11 and 2.13): it is probed once on a tiny uint8
    batch, and a torch where it is missing or refuses ``out=`` gets
    :func:`_interpolate_into` (the same values, one more allocation and copy per sample).
    """
    kernel = getattr(getattr(torch._C, "_nn", None), "upsample_bilinear2d", None)
    if kernel is None:
        return _interpolate_into
    probe = torch.arange(12, dtype=torch.uint8).reshape(1, 2, 2, 3).permute(0, 3, 1, 2)
    out = torch.empty((1, 1, 1, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
    try:
        kernel(probe, (1, 1), True, None, None, out=out)
    except (TypeError, RuntimeError):
        return _interpolate_into
    return kernel  # type: ignore[no-any-return]


_upsample = _out_kernel()


def _theta(crops: CropParams, height: int, width: int, size: tuple[int, int]) -> torch.Tensor:
    """Affine maps from output to input coordinates (``align_corners=False`` units).

    Output pixel ``j`` samples input pixel centre ``left + j * (w - 1) / (out_w - 1)``.
    """
    top, left = crops.top.to(torch.float32), crops.left.to(torch.float32)
    h, w = crops.height.to(torch.float32), crops.width.to(torch.float32)
    oh, ow = size
    step_y = (h - 1.0) / max(oh - 1, 1)
    step_x = (w - 1.0) / max(ow - 1, 1)
    sx = step_x * (ow / width) * (1.0 - 2.0 * crops.flip)
    sy = step_y * (oh / height)
    cx = (2.0 * left + w) / width - 1.0
    cy = (2.0 * top + h) / height - 1.0
    zero = torch.zeros_like(sx)
    return torch.stack([torch.stack([sx, zero, cx], 1), torch.stack([zero, sy, cy], 1)], 1)


def grid_resample(images: torch.Tensor, crops: CropParams, size: tuple[int, int]) -> torch.Tensor:
    """Crop, flip and resize a batch with one ``grid_sample`` (any device).

    Args:
        images: ``[B, H, W, 3]`` uint8.
        crops: Boxes and flips, one per sample, on ``images``' device.
        size: Output ``(height, width)``.

    Returns:
        Float32 ``[B, 3, height, width]`` in ``[0, 255]``.
    """
    b, height, width, _ = images.shape
    x = images.permute(0, 3, 1, 2).to(torch.float32)
    grid = F.affine_grid(_theta(crops, height, width, size), [b, 3, *size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _resize_one(crop: torch.Tensor, size: tuple[int, int], flip: bool) -> torch.Tensor:
    """Resize one ``[h, w, 3]`` crop view to ``[3, *size]`` uint8 with HWC strides.

    The crop is copied out once (the uint8 kernel wants it dense); a flip is that copy
    mirrored, which costs no more and spares a pass over the larger output. Mirroring before
    or after the resize is the same map: with first and last pixel centres aligned, output
    column ``j`` of the mirrored crop samples column ``W - 1 - j``'s source.

    The result lands in this thread's reused buffer (:func:`.threads.scratch`), valid until
    the thread resizes its next crop: ``upsample_bilinear2d`` with ``out=`` is the kernel
    ``F.interpolate`` calls, without its argument handling and a fresh output per sample.
    """
    dense = crop.flip(1) if flip else crop.contiguous()
    # [1, 3, h, w] with channels-last strides (made from a 4-d view): the SIMD uint8 kernel
    x = dense.unsqueeze(0).permute(0, 3, 1, 2)
    h, w = size
    out = scratch("resized", (1, h, w, 3), torch.uint8).permute(0, 3, 1, 2)
    _upsample(x, size, True, None, None, out=out)  # the out= overload (or its equivalent)
    return out[0]


def _copy(x: torch.Tensor, i: int, out: torch.Tensor) -> None:
    out.copy_(x)


def _fill(
    out: torch.Tensor, images: torch.Tensor, rows: list[list[int]], idx: range, convert: Converter
) -> None:
    size = (out.shape[2], out.shape[3])
    for i in idx:
        top, left, h, w, flip = rows[i]
        convert(_resize_one(images[i, top : top + h, left : left + w], size, bool(flip)), i, out[i])


def crop_resample(
    images: torch.Tensor,
    crops: CropParams,
    size: tuple[int, int],
    *,
    convert: Converter | None = None,
    threads: int = 1,
    dtype: torch.dtype = torch.float32,
    channels_last: bool = False,
) -> torch.Tensor:
    """Crop, flip and resize a CPU batch touching only each crop's pixels.

    Args:
        images: ``[B, H, W, 3]`` uint8 on the CPU.
        crops: Boxes and flips, one per sample (CPU tensors).
        size: Output ``(height, width)``.
        convert: ``convert(pixels, i, out_i)`` writes sample ``i``'s ``[3, H, W]`` result
            from its resized uint8 pixels while they are in cache (e.g. normalise, see
            :mod:`loaders.augment.image.color`); default: copy the ``[0, 255]`` values.
        threads: Worker threads sharing the samples (the kernels release the GIL); each
            runs with one OpenMP thread (see :mod:`loaders.augment.image.threads`).
        dtype: Output dtype; written directly by ``convert`` (no later cast).
        channels_last: Allocate the output channels-last (no later transpose).

    Returns:
        ``[B, 3, height, width]`` of ``dtype``, as written by ``convert``, in a reused buffer
        (see :mod:`loaders.augment.outbuf`: never one the caller still refers to).

    Raises:
        AugmentError: ``images`` is not on the CPU, or ``threads < 1``.
    """
    if images.device.type != "cpu":
        raise AugmentError(f"the fast path runs on the CPU; images are on {images.device}")
    if threads < 1:
        raise AugmentError(f"threads must be >= 1, got {threads}")
    b = images.shape[0]
    out = output_batch(b, size, dtype, channels_last)
    rows = torch.stack(
        [crops.top, crops.left, crops.height, crops.width, crops.flip.long()], 1
    ).tolist()
    parts = [range(k, b, threads) for k in range(min(threads, b))]
    workers = pool(threads)
    jobs = [submit_or_run(workers, _fill, out, images, rows, p, convert or _copy) for p in parts]
    for job in jobs:
        job.result()
    return out
