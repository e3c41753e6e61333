"""Smoke run of the fast path's per-step profile at a toy size: every step and call is timed."""

from __future__ import annotations

from benchmarks import augment_steps


def test_augment_steps_times_every_step_and_format(capsys) -> None:
    augment_steps.main(["--batch", "4", "--size", "12", "--store-size", "20", "--runs", "2"])
    out = capsys.readouterr().out
    for step in ("crop copy", "resize", "of which rounding to bfloat16"):
        assert f"{step} " in out
    for dtype in ("float32", "bfloat16", "float16"):
        for layout in ("channels_last", "planar"):
            assert f"normalise {dtype} {layout} " in out
    for name in ("float32 channels_last", "bfloat16 channels_last", "bfloat16 planar"):
        for threads in (1, 2):
            assert f"call {name}, {threads} thr wall " in out
            assert f"call {name}, {threads} thr CPU " in out
