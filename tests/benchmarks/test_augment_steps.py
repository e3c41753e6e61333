"""Smoke run of the fast path's per-step profile at a toy size: every step and call is timed."""

from __future__ import annotations

from benchmarks.suite import augment_steps
from tests.benchmarks.figures import assert_positive


def test_augment_steps_times_every_step_and_format(capsys) -> None:
    augment_steps.main(["--batch", "4", "--size", "12", "--store-size", "20", "--runs", "2"])
    out = capsys.readouterr().out
    for step in ("crop copy", "resize", "of which rounding to bfloat16"):
        assert_positive(out, step, "CPU ms/sample")
    for dtype in ("float32", "bfloat16", "float16"):
        for layout in ("channels_last", "planar"):
            assert_positive(out, f"normalise {dtype} {layout}", "CPU ms/sample")
    for name in ("float32 channels_last", "bfloat16 channels_last", "bfloat16 planar"):
        for threads in (1, 2):
            assert_positive(out, f"call {name}, {threads} thr", "ms/sample")  # wall
            assert_positive(out, f"call {name}, {threads} thr", "CPU ms/sample")
