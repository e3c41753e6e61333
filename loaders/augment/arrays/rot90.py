"""Rotate every spatial field of a sample by the same ``k * 90`` degrees, batched, on device.

One ``k`` in ``{0, 1, 2, 3}`` is drawn per sample (:func:`draw_k`, from the batch's
``torch.Generator``) and applied to each spatial field by its kind's loader rule
(:data:`ROT90`, keyed like :data:`loaders.augment.rules.APPLY`, open to kind modules:
:func:`precompute.kinds.hooks.register_rot90`), after the crop: the fields
are square ``n x n`` there. A rotation by ``k`` is ``torch.rot90(x, k, dims=(H, W))``
(counter-clockwise on screen, rows down): output pixel ``(i, j)`` shows stored pixel

* ``k = 0``: ``(i, j)``; ``k = 1``: ``(j, n-1-i)``; ``k = 2``: ``(n-1-i, n-1-j)``;
  ``k = 3``: ``(n-1-j, i)``,

done as one gather per field, so samples with different ``k`` share a kernel and nothing
waits for the host. Keypoints ``(x, y)`` in the pixel-centre convention (pixel ``(i, j)``
covers ``[j, j + 1) x [i, i + 1)``) map exactly: ``k = 1``: ``(y, n - x)``; ``k = 2``:
``(n - x, n - y)``; ``k = 3``: ``(n - y, x)``; a pixel centre lands on the centre of the
pixel its value moved to, and visibility is kept (the square maps onto itself).

Layouts: images and arrays ``[B, C, n, n]`` (the crop's output), masks ``[B, n, n]``,
keypoints ``[B, P, 3]``. Plain torch ops: CPU and CUDA alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from loaders.augment.errors import AugmentError
from loaders.augment.indexing import take_index
from precompute.kinds.hooks import ROT90_RULES, register_rot90, rot90_rule

__all__ = ["ROT90", "draw_k", "rot90_images", "rot90_keypoints", "rot90_masks", "rotate_field"]


def draw_k(batch: int, generator: torch.Generator, device: torch.device | str) -> torch.Tensor:
    """``[batch]`` int64 quarter turns in ``{0, 1, 2, 3}`` from ``generator``, on ``device``."""
    k = torch.randint(0, 4, (batch,), generator=generator, device=generator.device)
    return k.to(device, non_blocking=True)


def _square(shape: torch.Size, what: str) -> int:
    h, w = shape[-2], shape[-1]
    if h != w:
        raise AugmentError(f"rotate-90 needs square {what}, got {h}x{w}; crop to a square first")
    return int(h)


def _sources(k: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, n, n]`` stored row and column shown by each output pixel of each sample."""
    i = torch.arange(n, device=k.device)[None, :, None]
    j = torch.arange(n, device=k.device)[None, None, :]
    k = k.long()[:, None, None]
    m = n - 1
    rows = torch.where(k == 0, i, torch.where(k == 1, j, torch.where(k == 2, m - i, m - j)))
    cols = torch.where(k == 0, j, torch.where(k == 1, m - i, torch.where(k == 2, m - j, i)))
    return rows, cols


def rot90_masks(masks: torch.Tensor, k: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Rotate ``[B, n, n]`` masks by ``k[b]`` quarter turns (values and dtype kept)."""
    n = _square(masks.shape, "masks")
    rows, cols = _sources(k, n)
    b = torch.arange(masks.shape[0], device=masks.device)[:, None, None]
    return take_index(masks, (b, rows, cols))


def rot90_images(images: torch.Tensor, k: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Rotate ``[B, C, n, n]`` images or arrays by ``k[b]`` quarter turns (dtype kept)."""
    n = _square(images.shape, "images")
    rows, cols = _sources(k, n)
    b = torch.arange(images.shape[0], device=images.device)[:, None, None]
    return take_index(images.permute(0, 2, 3, 1), (b, rows, cols)).permute(0, 3, 1, 2)


def rot90_keypoints(points: torch.Tensor, k: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Map ``[B, P, 3]`` keypoints ``(x, y, v)`` of an ``size x size`` frame exactly."""
    if size is None:
        raise AugmentError("rotating keypoints needs the frame side (size)")
    x, y, v = points.unbind(-1)
    k = k.long()[:, None]
    nx, ny = size - x, size - y
    ox = torch.where(k == 0, x, torch.where(k == 1, y, torch.where(k == 2, nx, ny)))
    oy = torch.where(k == 0, y, torch.where(k == 1, nx, torch.where(k == 2, ny, x)))
    return torch.stack([ox, oy, v], -1)


def _keep(values: torch.Tensor, k: torch.Tensor, size: int | None = None) -> torch.Tensor:
    return values


# Built-in rotations, by the loader geometry rule names the kinds declare (``Kind.augment``),
# registered into the kinds layer's table, where a kind module adds its own (register_rot90).
BUILTIN: Mapping[str, Callable[..., torch.Tensor]] = {
    "bilinear": rot90_images,
    "array": rot90_images,
    "nearest": rot90_masks,
    "affine": rot90_keypoints,
    "none": _keep,
}
for _name, _rule in BUILTIN.items():
    if _name not in ROT90_RULES:
        register_rot90(_name, _rule)
ROT90 = ROT90_RULES  # every registered rotation


def rotate_field(rule: str, values: torch.Tensor, k: torch.Tensor, size: int) -> torch.Tensor:
    """Rotate a field's cropped ``values`` (frame ``size x size``) by its rule ``rule``.

    Raises:
        AugmentError: A rule without a rotation here.
    """
    turn = rot90_rule(rule)
    if turn is None:
        raise AugmentError(
            f"geometry rule {rule!r} has no rotate-90 (precompute.kinds.hooks.register_rot90); "
            f"rules: {sorted(ROT90)}"
        )
    return turn(values, k, size)
