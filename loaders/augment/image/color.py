"""Colour jitter, normalisation and the output format, as one per-sample colour matrix.

Brightness ``b``, contrast ``c`` and saturation ``s`` are linear in the pixel, so together with
the normalisation they form one per-sample affine map ``z = M x + v`` (``M`` 3x3), clamped once
at the end to the normalised image of ``[0, 255]``:

* brightness: ``x1 = b x``
* contrast, around the mean grey of ``x1``: ``x2 = c x1 + (1 - c) mean(grey(x1))``
* saturation, towards each pixel's grey: ``x3 = s x2 + (1 - s) grey(x2)``
* normalisation: ``z = x3 / (255 std) - mean / std``

(torchvision clamps after every step, and so differs where a step saturates.) The grid path
applies the map with one batched matmul, the fast path per sample; both build it with
:func:`color_affine`. Constants are Python scalars or built with fill kernels, so no
host-to-device copy happens per batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from loaders.augment.errors import AugmentError
from loaders.augment.image.ops import Normalize
from precompute.policy import GREY

__all__ = [
    "DTYPES",
    "GREY",
    "apply_color",
    "channel_affine",
    "clamp_bounds",
    "color_affine",
    "color_converter",
    "finish",
    "normalize_",
    "normalize_converter",
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# writes sample i's float result into out[3, H, W] from its resized uint8 [3, H, W] pixels
Converter = Callable[[torch.Tensor, int, torch.Tensor], None]


def channel_affine(norm: Normalize | None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Return per-channel ``(scale, shift)`` with ``normalized = pixel * scale + shift``."""
    if norm is None:
        return (1.0 / 255.0,) * 3, (0.0,) * 3
    scale = tuple(1.0 / (255.0 * s) for s in norm.std)
    shift = tuple(-m / s for m, s in zip(norm.mean, norm.std, strict=True))
    return scale, shift


def _vec(values: tuple[float, ...], like: torch.Tensor) -> torch.Tensor:
    out = torch.empty(len(values), dtype=torch.float32, device=like.device)
    for k, v in enumerate(values):
        out[k].fill_(v)  # fill kernels: no host-to-device copy
    return out


def color_affine(
    factors: torch.Tensor, channel_mean: torch.Tensor, norm: Normalize | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the per-sample map ``(M [B, 3, 3], v [B, 3])`` of jitter + normalisation.

    Args:
        factors: ``[B, 3]`` brightness, contrast, saturation factors.
        channel_mean: ``[B, 3]`` mean of each channel of the (resampled) image, in ``[0, 255]``.
        norm: Normalisation, or None for ``/ 255``.
    """
    b, c, s = (factors[:, k].view(-1, 1, 1) for k in range(3))
    grey = _vec(GREY, factors)
    scale, shift = channel_affine(norm)
    diag = torch.diag(_vec(scale, factors))
    eye = torch.eye(3, device=factors.device)
    mix = s * eye + (1.0 - s) * grey.view(1, 1, 3)  # rows: s e_k + (1 - s) grey
    m = diag @ (c * b * mix)
    mean_grey = (channel_mean * grey).sum(1)
    v = (1.0 - c.view(-1)) * b.view(-1) * mean_grey
    return m, v[:, None] * _vec(scale, factors) + _vec(shift, factors)


def clamp_bounds(norm: Normalize | None, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel ``[3, 1]`` bounds of the normalised image of ``[0, 255]``."""
    scale, shift = channel_affine(norm)
    lo = _vec(shift, like)
    return lo.view(3, 1), (lo + 255.0 * _vec(scale, like)).view(3, 1)


def apply_color(x: torch.Tensor, factors: torch.Tensor, norm: Normalize | None) -> torch.Tensor:
    """Jitter + normalise float ``[B, 3, H, W]`` pixels in ``[0, 255]`` (one batched matmul).

    Returns:
        Contiguous float32 ``[B, 3, H, W]``, normalised.
    """
    b, _, h, w = x.shape
    m, v = color_affine(factors.to(torch.float32), x.mean(dim=(2, 3)), norm)
    flat = x.reshape(b, 3, h * w)
    out = torch.baddbmm(v[:, :, None], m, flat)
    lo, hi = clamp_bounds(norm, x)
    return out.clamp_(lo, hi).view(b, 3, h, w)


def normalize_converter(norm: Normalize | None) -> Converter:
    """Per-sample uint8 -> normalised float, for the fast path.

    The output's memory format picks the kernels, each a dense pass in one dtype:

    * ``[3, H, W]`` planar (NCHW batch) into float32: a cast copy (the one transposing pass),
      then per-channel ``mul_`` and ``add_`` in place; into half types: one ``addcmul``
      (computed in float32, rounded once).
    * HWC memory (channels-last batch), like the resized pixels: no transpose at all. Both
      are viewed as ``[H, W * 3]`` rows and normalised by one mixed-dtype ``addcmul`` with a
      row of per-channel constants repeated ``W`` times: float32 math (the uint8 input cast
      once), the result rounded once into a half type, so it is bit for bit the float32
      result rounded to nearest even. Its temporaries cost less than the copies that avoided
      them (benchmarks.suite.augment: bfloat16 channels-last 0.93x float32 with a reused
      float32 buffer and one rounding copy, 0.96-1.01x with the one call).
    """
    scale, shift = channel_affine(norm)
    mul, add = torch.tensor(scale).view(3, 1, 1), torch.tensor(shift).view(3, 1, 1)
    rows: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # width -> (scale row, shift row)

    def row_constants(width: int) -> tuple[torch.Tensor, torch.Tensor]:
        if width not in rows:  # a race only builds the same row twice
            rows[width] = (torch.tensor(scale).repeat(width), torch.tensor(shift).repeat(width))
        return rows[width]

    def convert(x: torch.Tensor, i: int, out: torch.Tensor) -> None:
        if out.stride(0) == 1 and out.shape[0] == 3:  # channels-last memory: [H, W * 3] rows
            h, w = out.shape[1], out.shape[2]
            o, pixels = out.permute(1, 2, 0).view(h, 3 * w), x.permute(1, 2, 0).reshape(h, 3 * w)
            row_mul, row_add = row_constants(w)
            torch.addcmul(row_add, pixels, row_mul, out=o)  # float32 math, rounded once
            return
        if out.dtype != torch.float32:
            torch.addcmul(add, x, mul, out=out)
            return
        out.copy_(x)
        out.mul_(mul).add_(add)

    return convert


def color_converter(factors: torch.Tensor, norm: Normalize | None) -> Converter:
    """Per-sample uint8 -> jittered, normalised float, for the fast path (CPU tensors)."""
    lo, hi = clamp_bounds(norm, factors)

    def convert(x: torch.Tensor, i: int, out: torch.Tensor) -> None:
        mean = torch.mean(x, dim=(1, 2), dtype=torch.float32).view(1, 3)
        m, v = color_affine(factors[i : i + 1].to(torch.float32), mean, norm)
        pixels = x.to(torch.float32).view(3, -1)  # keeps the HWC strides: no transpose
        res = torch.addmm(v.view(3, 1), m[0], pixels).clamp_(lo, hi)
        out.copy_(res.view(out.shape))

    return convert


def normalize_(x: torch.Tensor, norm: Normalize | None) -> torch.Tensor:
    """In place: ``x / 255``, then ``(x - mean) / std`` per channel when ``norm`` is given."""
    scale, shift = channel_affine(norm)
    for k in range(3):
        x[:, k].mul_(scale[k]).add_(shift[k])
    return x


def finish(x: torch.Tensor, dtype: str, channels_last: bool) -> torch.Tensor:
    """Cast to the output dtype and memory format (one copy at most)."""
    if dtype not in DTYPES:
        raise AugmentError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return x.to(dtype=DTYPES[dtype], memory_format=fmt)
