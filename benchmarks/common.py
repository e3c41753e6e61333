"""Helpers shared by the benchmarks and the loaders' tests: a reference crop, store size, op counts.

Timing lives in :mod:`benchmarks.runner`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

__all__ = ["aten_op_counts", "center_crop", "store_bytes"]


def center_crop(path: str | Path, size: int) -> np.ndarray:
    """Decode ``path`` (Pillow), resize the short side to ``size`` (bilinear), crop the centre."""
    with Image.open(path) as im:
        img = im.convert("RGB")
    scale = size / min(img.size)
    w, h = max(size, round(img.width * scale)), max(size, round(img.height * scale))
    img = img.resize((w, h), Image.Resampling.BILINEAR)
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)))


def store_bytes(store: Path, array: str = "image") -> int:
    """Bytes of the files of ``array`` in the local store ``store`` (its shard files)."""
    return sum(f.stat().st_size for f in (store / array).rglob("*") if f.is_file())


def aten_op_counts(fn: Callable[[], Any]) -> dict[str, int]:
    """Run ``fn`` under the torch profiler (CPU) and count the aten ops it dispatched, by name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    counts: dict[str, int] = {}
    for event in prof.events():
        if event.name.startswith("aten::"):
            counts[event.name] = counts.get(event.name, 0) + 1
    return counts
