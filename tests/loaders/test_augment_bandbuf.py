"""The band path's reused CPU buffers: no page faults per batch, a kept batch never overwritten."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

from loaders.augment.arrays.bands import crop_arrays, normalize_bands
from loaders.augment.bandbuf import empty
from loaders.augment.crop import CropParams
from tests.loaders.bands_reference import reference_crop

ROOT = Path(__file__).resolve().parents[2]


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _crops(b: int) -> CropParams:
    ones = torch.ones(b, dtype=torch.long)
    return CropParams(ones, 0 * ones, 7 * ones, 8 * ones, (torch.arange(b) % 2).float())


def test_a_dropped_batch_is_reused_and_a_kept_one_never() -> None:
    x = torch.rand(5, 9, 9, 11)
    first = normalize_bands(crop_arrays(x, _crops(5), (6, 6)), [0.5] * 11, [2.0] * 11)
    where, copy = _ptr(first), first.clone()
    view = first[1:3, 0]  # a view keeps the buffer in use
    del first
    second = normalize_bands(crop_arrays(x * 3, _crops(5), (6, 6)), [0.5] * 11, [2.0] * 11)
    assert _ptr(second) != where
    assert torch.equal(view, copy[1:3, 0])
    del view, second
    third = normalize_bands(crop_arrays(x, _crops(5), (6, 6)), [0.5] * 11, [2.0] * 11)
    assert _ptr(third) == where and torch.equal(third, copy)  # free again: reused


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint16, torch.float64])
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last])
def test_empty_shape_dtype_and_memory_format(dtype: torch.dtype, fmt: torch.memory_format) -> None:
    out = empty((3, 4, 5, 6), dtype, torch.device("cpu"), fmt)
    assert out.shape == (3, 4, 5, 6) and out.dtype == dtype
    assert out.is_contiguous(memory_format=fmt)
    smaller = empty((2, 4, 5, 6), dtype, torch.device("cpu"), fmt)  # a last, short batch
    assert smaller.shape == (2, 4, 5, 6) and smaller.is_contiguous(memory_format=fmt)


def test_threads_cropping_at_once_each_get_their_own_values() -> None:
    g = torch.Generator().manual_seed(0)
    inputs = [torch.rand(8, 9, 9, 20, generator=g) for _ in range(4)]
    results: dict[int, list[torch.Tensor]] = {}

    def work(i: int) -> None:
        results[i] = [crop_arrays(inputs[i], _crops(8), (5, 7)) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, outs in results.items():
        want = reference_crop(inputs[i], _crops(8), (5, 7))
        for out in outs:
            torch.testing.assert_close(out, want, rtol=0, atol=1e-6)


def test_cpu_batches_cost_no_page_faults() -> None:
    """A fresh process (the allocator's state decides whether freed blocks go back to the OS):
    after two warm-up batches, a crop and normalise of a 2 MiB batch touches no new page."""
    code = textwrap.dedent("""
        import resource, torch
        from loaders.augment.arrays.bands import crop_arrays, normalize_bands
        from loaders.augment.crop import CropParams
        x = torch.rand(64, 9, 9, 100)
        n = torch.ones(64, dtype=torch.long)
        crops = CropParams(0 * n, n, 8 * n, 7 * n, (torch.arange(64) % 2).float())
        def batch():
            return normalize_bands(crop_arrays(x, crops, (9, 9)), [0.5] * 100, [2.0] * 100)
        batch(), batch()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            batch()
        print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    faults = float(done.stdout.split()[-1])
    assert faults < 25, f"{faults} page faults per batch (a fresh 2 MiB batch is 512 pages)"
