"""The check's raw dataset: photo-like JPEGs of 256-320 px in class folders.

Each image is :func:`precompute.sample.make_image` (a class-dependent gradient, shape and
noise) saved as a baseline JPEG at quality 90: what nvJPEG, Pillow and the build decode alike.
A pure function of the arguments: the same seed gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from precompute.sample import CLASS_NAMES, make_image

__all__ = ["make_photos"]


def make_photos(
    root: str | Path,
    images: int,
    *,
    classes: int = len(CLASS_NAMES),
    size_range: tuple[int, int] = (256, 320),
    seed: int = 0,
) -> int:
    """Write ``images`` JPEGs under ``root/<class>/NNNNN.jpg``; return the bytes written.

    Raises:
        ValueError: A count below 1, more classes than names, or a bad size range.
    """
    if images < 1 or not 1 <= classes <= len(CLASS_NAMES):
        raise ValueError(
            f"images must be >= 1 and classes in 1..{len(CLASS_NAMES)}, got {images}, {classes}"
        )
    lo, hi = size_range
    if not 16 <= lo <= hi:
        raise ValueError(f"size_range must satisfy 16 <= low <= high, got {size_range!r}")
    root = Path(root)
    total = 0
    for index in range(images):
        label = index % classes
        folder = root / CLASS_NAMES[label]
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([seed, index, 2])
        size = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1)))
        path = folder / f"{index:05d}.jpg"
        make_image(seed, index, label, size, classes).save(path, quality=90)
        total += path.stat().st_size
    return total
