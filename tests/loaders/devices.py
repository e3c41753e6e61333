"""The devices the loader's augmentation tests run on: the CPU always, CUDA where there is one.

``@pytest.mark.parametrize("device", DEVICES)``: the CUDA case is marked ``gpu`` and skipped
on a machine without CUDA.
"""

from __future__ import annotations

import pytest
import torch

__all__ = ["DEVICES"]

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
        ],
    ),
]
