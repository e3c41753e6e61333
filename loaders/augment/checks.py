"""Checks of an augment policy's inputs: shapes, dtypes and devices, extent values."""

from __future__ import annotations

import torch

from loaders.augment.errors import AugmentError

__all__ = ["check_extent_values", "check_inputs"]


def check_inputs(
    images: torch.Tensor, extents: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Check shapes, dtypes and devices (metadata only: no host sync)."""
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[-1] != 3:
        raise AugmentError(
            f"images must be [B, H, W, 3] uint8, got {tuple(images.shape)} {images.dtype}"
        )
    if tuple(extents.shape) != (images.shape[0], 4) or extents.is_floating_point():
        raise AugmentError(
            f"extents must be [{images.shape[0]}, 4] integer (top, left, h, w), "
            f"got {tuple(extents.shape)} {extents.dtype}"
        )
    if extents.device != images.device:
        raise AugmentError(f"extents are on {extents.device}, images on {images.device}")
    if generator is not None and generator.device.type != images.device.type:
        raise AugmentError(f"generator is on {generator.device}, images on {images.device}")


def check_extent_values(
    extents: torch.Tensor, height: int, width: int, what: str = "extent", frame: str = "image"
) -> None:
    """Raise if an extent is empty or leaves the image (reads values: the CPU path only).

    ``what`` and ``frame`` name the boxes and what they lie in (a crop box in an array).
    """
    top, left, h, w = extents.unbind(1)
    bad = (top < 0) | (left < 0) | (h < 1) | (w < 1) | (top + h > height) | (left + w > width)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise AugmentError(
            f"sample {i}: {what} (top, left, height, width) = {extents[i].tolist()} is "
            f"empty or not inside the {height}x{width} {frame}"
        )
