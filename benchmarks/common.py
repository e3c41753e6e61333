"""Helpers shared by the benchmark scripts: a reference centre crop and process-tree CPU time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from PIL import Image

__all__ = ["aten_op_counts", "center_crop", "tree_cpu_seconds"]


def center_crop(path: str | Path, size: int) -> np.ndarray:
    """Decode ``path`` (Pillow), resize the short side to ``size`` (bilinear), crop the centre."""
    with Image.open(path) as im:
        img = im.convert("RGB")
    scale = size / min(img.size)
    w, h = max(size, round(img.width * scale)), max(size, round(img.height * scale))
    img = img.resize((w, h), Image.Resampling.BILINEAR)
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)))


def tree_cpu_seconds() -> float:
    """Return user+system CPU seconds of this process, its reaped children and live descendants.

    Reaped children (pool or DataLoader workers that exited) count through this process's
    ``children_user``/``children_system`` times; live ones (Ray, running workers) one by one.
    """
    me = psutil.Process()
    total = float(sum(me.cpu_times()[:4]))  # user, system, children_user, children_system
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a worker may exit meanwhile
            total += float(sum(child.cpu_times()[:2]))
    return total


def aten_op_counts(fn: Callable[[], Any]) -> dict[str, int]:
    """Run ``fn`` under the torch profiler (CPU) and count the aten ops it dispatched, by name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    counts: dict[str, int] = {}
    for event in prof.events():
        if event.name.startswith("aten::"):
            counts[event.name] = counts.get(event.name, 0) + 1
    return counts
