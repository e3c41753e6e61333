"""Checks of an augment policy: its numbers and ranges, its inputs' shapes, dtypes and devices.

The number checks serve the parameters whose ranges are a policy's own (audio, mixup, threads);
the image crop, flip, jitter and normalisation ranges are the shared table's
(:data:`precompute.policy.BOUNDS`). Both are :mod:`precompute.checks`, raising
:class:`AugmentError` here: every message names the parameter and the value.
"""

from __future__ import annotations

from typing import Any

import torch

from loaders.augment.errors import AugmentError
from precompute import checks

__all__ = [
    "check_extent_values",
    "check_inputs",
    "check_integer",
    "check_labels",
    "check_number",
    "check_pair",
]


def check_number(where: str, value: Any, lo: float, hi: float) -> float:
    """Return ``value`` as a float if it is a number in ``[lo, hi]`` (NaN never is).

    Raises:
        AugmentError: ``WHERE must be a number in [lo, hi], got VALUE``.
    """
    return checks.check_number(where, value, lo, hi, AugmentError)


def check_integer(where: str, value: Any, lo: int, hi: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[lo, hi]`` (``hi`` None: >= lo).

    Raises:
        AugmentError: ``WHERE must be an integer in [lo, hi] (or >= lo), got VALUE``.
    """
    return checks.check_integer(where, value, lo, hi, AugmentError)


def check_pair(where: str, value: Any, lo: float, hi: float, unit: str) -> tuple[float, float]:
    """Return ``value`` as ``(low, high)``: a tuple or list of two numbers in ``[lo, hi]``.

    Raises:
        AugmentError: Not a pair, a number out of range or low above high; naming the value.
    """
    return checks.check_pair(where, value, lo, hi, AugmentError, unit)


def check_inputs(
    images: torch.Tensor, extents: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Check shapes, dtypes and devices (metadata only: no host sync)."""
    pixels = images.dtype in (torch.uint8, torch.uint16)  # 8 or 16 bits (--bit-depth 16)
    if not pixels or images.dim() != 4 or images.shape[-1] != 3:
        raise AugmentError(
            f"images must be [B, H, W, 3] uint8 or uint16, got {tuple(images.shape)} {images.dtype}"
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


def check_labels(labels: torch.Tensor, num_classes: int, where: str) -> None:
    """Raise if a class label is outside ``[0, num_classes)``.

    Reads values only when ``labels`` are on the host: device labels are left unchecked rather
    than synchronising the device.

    Raises:
        AugmentError: ``WHERE: label L of sample I is not in [0, num_classes)`` (the first).
    """
    if labels.device.type != "cpu":
        return
    bad = (labels < 0) | (labels >= num_classes)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise AugmentError(
            f"{where}: label {int(labels[i])} of sample {i} is not in [0, {num_classes})"
        )
