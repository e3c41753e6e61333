"""Loader-side geometry of named fields: one draw per sample, applied to every spatial field.

The boxes and flips come from the one crop sampler (:func:`loaders.augment.crop.random_crops`,
:func:`~loaders.augment.crop.center_crops`, both over :mod:`precompute.cropsampler`); this module
applies them to each field by the rule its kind declares (``Kind.augment``), batched, on the
tensors' device (CPU or CUDA), with no host sync (a field's flipped point order is copied to
the device once and kept):

* ``bilinear`` (images): :func:`loaders.augment.image.resample.grid_resample`.
* ``nearest`` (masks): output pixel ``j`` of a crop of width ``w`` resized to ``ow`` takes
  the stored pixel nearest to the position the image kernel samples there,
  ``left + j * (w - 1) / (ow - 1)`` (pixel centres onto pixel centres, ``align_corners``), in
  exact integer arithmetic: values are never blended.
* ``affine`` (keypoints): the same map on continuous pixel-centre coordinates (pixel
  ``(i, j)`` covers ``[j, j + 1) x [i, i + 1)``): ``x' = ow / 2 + (x - left - w / 2) * s``
  with ``s = (ow - 1) / (w - 1)`` (``ow / w`` for a one-pixel side), then ``x' -> ow - x'``
  under a flip, with the field's ``flip_pairs`` swapped. A point that lies outside the crop
  box or lands outside the output frame gets visibility 0; its coordinates are still mapped.
* ``none``: the values as they are.

:data:`APPLY` maps the rule names to these functions; they are registered at import into the
kinds layer's table (:func:`precompute.kinds.hooks.register_loader_rule`), where a kind module
adds its own, and :func:`apply_field` looks a field's rule up there, so no caller tests a
kind's name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from loaders.augment.arrays.bands import crop_arrays
from loaders.augment.crop import CropParams
from loaders.augment.errors import AugmentError
from loaders.augment.image.resample import grid_resample
from loaders.augment.indexing import take_index
from precompute.fields import FieldSpec
from precompute.kinds.hooks import LOADER_RULES, loader_rule, register_loader_rule

__all__ = ["APPLY", "apply_field", "crop_images", "crop_keypoints", "crop_masks", "nearest_index"]

Size = tuple[int, int]


def nearest_index(start: torch.Tensor, length: torch.Tensor, n: int) -> torch.Tensor:
    """``[B, n]`` stored indices of ``n`` output pixels over ``[start, start + length)``.

    Output pixel ``j`` takes ``start + floor(j * (length - 1) / (n - 1) + 1/2)`` (the centre
    pixel ``start + length // 2`` when ``n == 1``), computed in integers.
    """
    j = torch.arange(n, device=start.device, dtype=torch.int64)[None, :]
    start, length = start.long()[:, None], length.long()[:, None]
    if n == 1:
        return start + length // 2
    return start + (2 * j * (length - 1) + (n - 1)) // (2 * (n - 1))


def crop_masks(
    masks: torch.Tensor, crops: CropParams, size: Size, options: Any = None
) -> torch.Tensor:
    """Crop, flip and resize ``[B, H, W]`` masks nearest-neighbour to ``[B, *size]``.

    Args:
        masks: ``[B, H, W]`` class ids, any integer dtype (kept).
        crops: Boxes and flips, one per sample, on ``masks``' device.
        size: Output ``(height, width)``.
        options: Unused (the field's options; masks need none here).

    Returns:
        ``[B, height, width]`` of ``masks``' dtype; every value is a stored value of the box.
    """
    rows = nearest_index(crops.top, crops.height, size[0])
    cols = nearest_index(crops.left, crops.width, size[1])
    cols = torch.where(crops.flip[:, None] > 0, cols.flip(1), cols)
    if masks.device.type == "cpu":
        return take_rows_cols(masks, rows, cols)
    b = torch.arange(masks.shape[0], device=masks.device)[:, None, None]
    return take_index(masks, (b, rows[:, :, None], cols[:, None, :]))


def take_rows_cols(masks: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """CPU: ``masks[b, rows[b][:, None], cols[b][None, :]]`` for every sample ``b``.

    The same values as the batched advanced index of :func:`crop_masks` (the device path),
    taken per sample with numpy, rows then columns: no broadcast index of ``B * h * w``
    entries. Indices are bounds-checked (``take``'s default).
    """
    m, r, c = masks.numpy(), rows.numpy(), cols.numpy()
    out = np.empty((m.shape[0], r.shape[1], c.shape[1]), m.dtype)
    for i in range(m.shape[0]):
        np.take(m[i].take(r[i], 0), c[i], 1, out=out[i])
    return torch.from_numpy(out)


def _axis(start: torch.Tensor, length: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and offset of ``x' = x * scale + offset`` along one axis (float64, per sample)."""
    start, length = start.to(torch.float64), length.to(torch.float64)
    centred = (n - 1) / (length - 1).clamp(min=1.0)
    scale = torch.where((length > 1) & (n > 1), centred, n / length)
    return scale, n / 2 - (start + length / 2) * scale


@functools.lru_cache(maxsize=64)
def _swap(pairs: tuple[tuple[int, int], ...], points: int, device: torch.device) -> torch.Tensor:
    """The point order of a flipped sample, made once per (pairs, points, device)."""
    perm = list(range(points))
    for a, b in pairs:
        if max(a, b) >= points:
            raise AugmentError(f"flip pair {[a, b]} names point {max(a, b)}; there are {points}")
        perm[a], perm[b] = b, a
    return torch.tensor(perm, device=device)


def crop_keypoints(
    points: torch.Tensor, crops: CropParams, size: Size, options: Mapping[str, Any] | None = None
) -> torch.Tensor:
    """Map ``[B, P, 3]`` keypoints ``(x, y, visible)`` exactly into the crops' output frame.

    Args:
        points: ``[B, P, 3]`` float keypoints in stored-image pixel-centre coordinates.
        crops: Boxes and flips, one per sample, on ``points``' device.
        size: Output ``(height, width)``.
        options: The field's options; ``flip_pairs`` (``[[a, b], ...]``) are swapped in
            flipped samples, so a left landmark stays a left landmark.

    Returns:
        ``[B, P, 3]`` float32: mapped coordinates; visibility kept, or 0 for a point outside
        its crop box or outside the output frame.
    """
    sx, bx = _axis(crops.left, crops.width, size[1])
    sy, by = _axis(crops.top, crops.height, size[0])
    p = points.to(torch.float64)
    x, y, v = p[..., 0], p[..., 1], p[..., 2]
    left, top = crops.left[:, None], crops.top[:, None]
    in_box = (x >= left) & (x < left + crops.width[:, None])
    in_box &= (y >= top) & (y < top + crops.height[:, None])
    ox, oy = x * sx[:, None] + bx[:, None], y * sy[:, None] + by[:, None]
    flipped = crops.flip[:, None] > 0
    ox = torch.where(flipped, size[1] - ox, ox)
    in_frame = (ox >= 0) & (ox < size[1]) & (oy >= 0) & (oy < size[0])
    out = torch.stack([ox, oy, torch.where(in_box & in_frame, v, 0.0)], -1).to(torch.float32)
    pairs = (options or {}).get("flip_pairs", ())
    if not pairs:
        return out
    key = tuple((int(a), int(b)) for a, b in pairs)
    swapped = out.index_select(1, _swap(key, out.shape[1], out.device))
    return torch.where(flipped[..., None], swapped, out)


def crop_images(
    images: torch.Tensor, crops: CropParams, size: Size, options: Any = None
) -> torch.Tensor:
    """Crop, flip and resize ``[B, H, W, C]`` uint8 images (C = 1 or 3) bilinear.

    Returns:
        ``[B, C, height, width]`` float32 in ``[0, 255]`` (the kernel of
        :func:`~loaders.augment.image.resample.grid_resample`, which resamples three channels).
    """
    c = images.shape[3]
    if c not in (1, 3):
        raise AugmentError(f"images must have 1 or 3 channels, got shape {tuple(images.shape)}")
    return grid_resample(images.expand(-1, -1, -1, 3), crops, size)[:, :c]


def _keep(values: torch.Tensor, crops: CropParams, size: Size, options: Any = None) -> torch.Tensor:
    return values


# The loader's built-in geometry rules, by the names the kinds declare (``Kind.augment``).
BUILTIN: Mapping[str, Callable[..., torch.Tensor]] = {
    "bilinear": crop_images,
    "nearest": crop_masks,
    "affine": crop_keypoints,
    "none": _keep,
    "array": crop_arrays,  # cubes: [B, H, W, C] -> [B, C, h, w] (loaders.augment.arrays.bands)
}
for _name, _rule in BUILTIN.items():
    if _name not in LOADER_RULES:
        register_loader_rule(_name, _rule)
APPLY = LOADER_RULES  # every registered rule: the built-ins above and the kind modules'


def apply_field(
    field: FieldSpec, values: torch.Tensor, crops: CropParams, size: Size
) -> torch.Tensor:
    """Apply the batch's one draw (``crops``) to ``field``'s values by its kind's rule.

    Raises:
        AugmentError: The kind's rule has no torch implementation here.
    """
    rule = loader_rule(field.augment)
    if rule is None:
        raise missing_rule(field)
    return rule(values, crops, size, field.options)


def missing_rule(field: FieldSpec) -> AugmentError:
    """The error of a field whose kind's loader geometry rule no module registered."""
    return AugmentError(
        f"field {field.name!r}: kind {field.kind!r} needs geometry rule "
        f"{field.augment!r}, which the torch loader does not implement "
        "(precompute.kinds.hooks.register_loader_rule)"
    )
