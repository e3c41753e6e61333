"""CPU cost of the fast path's output formats, measured as ratios within one process.

Absolute times depend on the host and its load; the ratios between output formats of the same
work do not (much). Each side is timed as process CPU time (the work runs on the fast path's
worker thread), interleaved, best of several runs.
"""

from __future__ import annotations

import time

import pytest
import torch

from loaders.augment import TrainAugment

B, S, OUT = 16, 256, 224


def _cpu_ms(aug: TrainAugment, images: torch.Tensor, extents: torch.Tensor, seed: int) -> float:
    t0 = time.process_time()
    aug(images, extents, torch.Generator().manual_seed(seed))
    return 1e3 * (time.process_time() - t0)


def _best_cpu_ms(augs: dict[str, TrainAugment], runs: int = 9) -> dict[str, float]:
    images = torch.randint(
        0, 256, (B, S, S, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    extents = torch.tensor([[0, 0, S, S]] * B, dtype=torch.int32)
    best = {name: float("inf") for name in augs}
    for run in range(runs + 1):  # the first round warms buffers and kernels up
        for name, aug in augs.items():
            ms = _cpu_ms(aug, images, extents, run)
            if run:
                best[name] = min(best[name], ms)
    return best


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_channels_last_output_costs_no_more_than_planar_float32(dtype: str) -> None:
    """Channels-last output matches the resized pixels' layout: no transposing pass at all."""
    base = TrainAugment(size=OUT, path="fast", threads=1)
    cl = TrainAugment(size=OUT, path="fast", threads=1, dtype=dtype, channels_last=True)
    best = _best_cpu_ms({"planar float32": base, "channels_last": cl})
    assert best["channels_last"] <= best["planar float32"], best
