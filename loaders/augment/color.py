"""Colour jitter, normalisation and the output format, batched over per-sample factors.

All functions work in place on float32 ``[B, 3, H, W]`` pixels in ``[0, 255]`` with a fixed
number of kernels per batch, on any device. Per-channel constants are Python scalars, so no
host-to-device copy happens per batch.
"""

from __future__ import annotations

import torch

from loaders.augment.errors import AugmentError
from loaders.augment.ops import ColorJitter, Normalize

__all__ = ["DTYPES", "apply_jitter", "channel_affine", "finish", "jitter_factors", "normalize_"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_GRAY = (0.299, 0.587, 0.114)


def jitter_factors(u: torch.Tensor, jitter: ColorJitter) -> torch.Tensor:
    """Map ``[B, 3]`` uniforms to brightness, contrast, saturation factors ``1 +- strength``."""
    strength = (jitter.brightness, jitter.contrast, jitter.saturation)
    cols = [1.0 + s * (2.0 * u[:, k] - 1.0) for k, s in enumerate(strength)]
    return torch.stack(cols, 1)


def _gray(x: torch.Tensor) -> torch.Tensor:
    return x[:, 0:1] * _GRAY[0] + x[:, 1:2] * _GRAY[1] + x[:, 2:3] * _GRAY[2]


def apply_jitter(x: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """Apply brightness, then contrast, then saturation, in place, clamping to ``[0, 255]``.

    Args:
        x: Float ``[B, 3, H, W]`` in ``[0, 255]``.
        factors: ``[B, 3]`` factors from :func:`jitter_factors`.
    """
    f = factors.to(x.dtype).view(-1, 3, 1, 1)
    b, c, s = f[:, 0:1], f[:, 1:2], f[:, 2:3]
    x.mul_(b).clamp_(0.0, 255.0)
    mean = _gray(x).mean(dim=(2, 3), keepdim=True)
    x.mul_(c).add_(mean * (1.0 - c)).clamp_(0.0, 255.0)
    x.mul_(s).add_(_gray(x) * (1.0 - s)).clamp_(0.0, 255.0)
    return x


def channel_affine(norm: Normalize | None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Return per-channel ``(scale, shift)`` with ``normalized = pixel * scale + shift``."""
    if norm is None:
        return (1.0 / 255.0,) * 3, (0.0,) * 3
    scale = tuple(1.0 / (255.0 * s) for s in norm.std)
    shift = tuple(-m / s for m, s in zip(norm.mean, norm.std, strict=True))
    return scale, shift


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
