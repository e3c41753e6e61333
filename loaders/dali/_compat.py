"""Lazy access to DALI: the one place that imports ``nvidia.dali``.

DALI is an optional extra. Importing :mod:`loaders` or :mod:`loaders.dali` never imports it;
building a DALI loader does, and raises an :class:`ImportError` naming the extra when it is
missing.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import torch

__all__ = ["EXTRA_HINT", "dali_device_id", "require_dali", "to_torch"]

EXTRA_HINT = "pip install 'nostall[dali]'"


def require_dali() -> ModuleType:
    """Return the ``nvidia.dali`` module.

    Raises:
        ImportError: DALI is not installed; the message names the extra to install.
    """
    try:
        return importlib.import_module("nvidia.dali")
    except ImportError as exc:
        raise ImportError(
            f"the DALI loaders need NVIDIA DALI, which is not installed: {EXTRA_HINT} "
            f"(or nvidia-dali-cuda120 / nvidia-dali-cuda110 to match your CUDA) ({exc})"
        ) from exc


def dali_device_id(device: torch.device) -> int | None:
    """Return the DALI ``device_id`` for ``device``: None (CPU-only pipeline) or a GPU index."""
    if device.type == "cpu":
        return None
    if device.type != "cuda":
        raise ValueError(f"DALI loaders run on 'cpu' or 'cuda' devices, got {device}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device} requested but CUDA is not available")
    return device.index if device.index is not None else torch.cuda.current_device()


def to_torch(tensor_list: Any, device: torch.device) -> torch.Tensor:
    """Copy a dense DALI TensorList (CPU or GPU) into a new torch tensor on ``device``.

    GPU outputs are copied on torch's current stream, so later torch work is ordered after it.
    """
    from nvidia.dali.plugin.pytorch.torch_utils import feed_ndarray, to_torch_type

    dense = tensor_list.as_tensor()
    dtype = to_torch_type[dense.dtype]
    out = torch.empty(dense.shape(), dtype=dtype, device=device)
    stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
    return feed_ndarray(dense, out, cuda_stream=stream)
