"""The classic per-sample geometry of the ``workers`` strategy, in Pillow and numpy.

What a training script without a store writes, sample by sample: torchvision's random resized
crop draw (:func:`random_resized_crop_box`), the crop resized with Pillow (bilinear pixels,
nearest-neighbour masks), a horizontal flip, and the same crop mapped exactly onto points and
boxes. The ranges are the ``online`` policy of :mod:`precompute.policy`, as ``TrainAugment``'s
are, so both sides do the same work per sample. The output is a side ``S`` or a frame
``(height, width)`` (a ``--size WxH`` store's). Coordinates are continuous pixels (the centre
of pixel ``i`` at ``i + 0.5``), as the stores hold them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PIL import Image

from precompute.policy import ATTEMPTS, IMAGENET_MEAN, IMAGENET_STD, POLICIES, RATIO

__all__ = [
    "Box",
    "Out",
    "crop_boxes",
    "crop_mask",
    "crop_pixels",
    "crop_points",
    "normalise",
    "out_hw",
    "random_resized_crop_box",
]

Box = tuple[int, int, int, int]  # left, top, right, bottom (exclusive), input pixels
Out = int | tuple[int, int]  # the output: a side S, or (height, width)
MEAN = np.asarray(IMAGENET_MEAN, np.float32) * 255
INV_STD = 1.0 / (np.asarray(IMAGENET_STD, np.float32) * 255)
BILINEAR = Image.Resampling.BILINEAR


def random_resized_crop_box(
    rng: np.random.Generator,
    width: int,
    height: int,
    scale: tuple[float, float] = POLICIES["online"].scale,
    ratio: tuple[float, float] = RATIO,
) -> Box:
    """Return a crop box ``(left, top, right, bottom)`` drawn like torchvision's RRC.

    The classic baseline keeps torchvision's own draw (10 tries, then a centre crop); its
    ranges are the ``online`` policy of :mod:`precompute.policy`, as ``TrainAugment``'s are.
    """
    area = width * height
    log_r = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(ATTEMPTS):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_r))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    side = min(width, height)  # fallback: centre crop
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def out_hw(size: Out) -> tuple[int, int]:
    """``(height, width)`` of an output side or frame."""
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def normalise(pixels: np.ndarray) -> np.ndarray:
    """``(H, W, C)`` uint8 or uint16 -> ``(C, H, W)`` float32 normalised by the ImageNet mean/std.

    16-bit pixels are scaled by 255/65535 first, as the store loaders scale them, so the
    normalisation means the same at either depth; one channel takes the first mean and std.
    """
    c = pixels.shape[2]
    mean, inv = (MEAN, INV_STD) if c == 3 else (MEAN[:c].mean(), INV_STD[:c].mean())
    out = pixels.astype(np.float32)
    if pixels.dtype == np.uint16:
        out *= np.float32(255.0 / 65535.0)
    out = (out - mean) * inv
    return np.ascontiguousarray(out.transpose(2, 0, 1))


def _resized(pixels: np.ndarray, box: Box, size: Out) -> np.ndarray:
    """``(H, W, C)`` uint8 or uint16 pixels cropped to ``box`` and resized bilinear.

    uint8 grey or RGB is one Pillow image (``L``, ``RGB``); anything else (16 bits) is resized
    plane by plane (Pillow resizes ``I;16`` in 16 bits), as the build places it.
    """
    c, (h, w) = pixels.shape[2], out_hw(size)
    if pixels.dtype == np.uint8 and c in (1, 3):
        img = Image.fromarray(pixels[..., 0] if c == 1 else pixels, "L" if c == 1 else "RGB")
        return np.asarray(img.resize((w, h), BILINEAR, box=box)).reshape(h, w, c)
    planes = [Image.fromarray(np.ascontiguousarray(pixels[..., k])) for k in range(c)]
    out = [np.asarray(p.resize((w, h), BILINEAR, box=box), pixels.dtype) for p in planes]
    return np.stack(out, 2)


def crop_pixels(pixels: np.ndarray | Image.Image, box: Box, size: Out, flip: bool) -> np.ndarray:
    """The crop ``box`` of ``(H, W, C)`` pixels resized bilinear to ``size``, normalised.

    ``pixels``: uint8 or uint16 (``--bit-depth 16``), one channel or three, as the build's
    decoder gives them; or a Pillow image already (``L`` or ``RGB``): no copy into one first.
    """
    if isinstance(pixels, Image.Image):
        c, (h, w) = len(pixels.getbands()), out_hw(size)
        out = np.asarray(pixels.resize((w, h), BILINEAR, box=box)).reshape(h, w, c)
    else:
        out = _resized(pixels, box, size)
    return normalise(out[:, ::-1] if flip else out)


def crop_mask(mask: np.ndarray, box: Box, size: Out, flip: bool) -> np.ndarray:
    """The crop ``box`` of ``(H, W)`` class ids resized nearest-neighbour to ``size``, int64."""
    h, w = out_hw(size)
    img = Image.fromarray(mask)
    out = np.asarray(img.resize((w, h), Image.Resampling.NEAREST, box=box), np.int64)
    return np.ascontiguousarray(out[:, ::-1] if flip else out)


def _scale(box: Box, size: Out) -> tuple[float, float]:
    h, w = out_hw(size)
    return w / (box[2] - box[0]), h / (box[3] - box[1])


def crop_points(
    points: np.ndarray, box: Box, size: Out, flip: bool, pairs: Sequence[Sequence[int]] = ()
) -> np.ndarray:
    """``(P, 3)`` points ``(x, y, visible)`` mapped into the crop; those it leaves out get 0.

    A flip mirrors x and swaps each left/right pair of ``pairs``.
    """
    (sx, sy), (h, w) = _scale(box, size), out_hw(size)
    out = points.astype(np.float32, copy=True)
    out[:, 0] = (out[:, 0] - box[0]) * sx
    out[:, 1] = (out[:, 1] - box[1]) * sy
    inside = (out[:, :2] >= 0).all(1) & (out[:, 0] < w) & (out[:, 1] < h)
    out[:, 2] = np.where(inside & (out[:, 2] > 0), 1.0, 0.0)
    if flip:
        out[:, 0] = w - out[:, 0]
        for a, b in pairs:
            out[[a, b]] = out[[b, a]]
    return out


def crop_boxes(
    rows: np.ndarray, box: Box, size: Out, flip: bool, min_visibility: float, keep: int
) -> np.ndarray:
    """``(N, 5)`` boxes ``(x0, y0, x1, y1, class)`` mapped into the crop, ``(keep, 5)`` out.

    A box the crop cuts is clipped to it and dropped when it keeps less than
    ``min_visibility`` of its area; the rows left are first, the rest ``-1``.
    """
    real = rows[rows[:, 4] >= 0].astype(np.float32)
    (sx, sy), (h, w) = _scale(box, size), out_hw(size)
    mapped = real.copy()
    mapped[:, [0, 2]] = (real[:, [0, 2]] - box[0]) * sx
    mapped[:, [1, 3]] = (real[:, [1, 3]] - box[1]) * sy
    clipped = mapped.copy()
    clipped[:, [0, 2]] = clipped[:, [0, 2]].clip(0, w)
    clipped[:, [1, 3]] = clipped[:, [1, 3]].clip(0, h)
    area = (mapped[:, 2] - mapped[:, 0]) * (mapped[:, 3] - mapped[:, 1])
    kept = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
    clipped = clipped[(kept > 0) & (kept >= min_visibility * np.maximum(area, 1e-9))]
    if flip:
        clipped[:, [0, 2]] = w - clipped[:, [2, 0]]
    out = np.full((keep, 5), -1.0, np.float32)
    out[: len(clipped)] = clipped[:keep]
    return out
