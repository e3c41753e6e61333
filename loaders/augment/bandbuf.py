"""Reused CPU buffers: no page faults per batch (the band path, the fast path's outputs).

Every step of an array crop writes a batch-sized tensor (the taken rows, their blend, the
normalised output). Freshly allocated, each of them page-faults and is zeroed by the kernel
again on every batch (glibc hands large freed blocks back to the OS), which costs more CPU
than the arithmetic. :func:`empty` hands out CPU tensors from process-wide
:class:`~loaders.transfer.buffers.BufferPool` s instead, keyed by dtype, row length and role
(``out``: may reach the caller; ``tmp``: dropped within the step, so batches a caller keeps
never starve the intermediates). A buffer is handed out again only once nothing refers to it
any more, so a batch the caller keeps (the crop's or the normalise's output) is never
overwritten. Other devices (CUDA has its caching allocator) and dtypes numpy lacks get a
plain ``torch.empty``.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Literal

import numpy as np
import torch

from loaders.transfer.buffers import BufferPool

__all__ = ["Role", "empty"]

Role = Literal["out", "tmp"]

_NUMPY = {
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.float16: np.float16,
    torch.bfloat16: np.uint16,  # the same bytes, viewed as bfloat16
    torch.uint8: np.uint8,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.uint16: np.uint16,
    torch.int32: np.int32,
    torch.int64: np.int64,
}
# a step holds two intermediates of one shape at once
_KEEP_BUFFERS: dict[Role, int] = {"out": 3, "tmp": 2}
_KEEP_SHAPES = 8
_POOLS: OrderedDict[tuple[object, ...], BufferPool] = OrderedDict()
_LOCK = threading.Lock()


def _pool(row: int, dtype: torch.dtype, rows: int, role: Role) -> BufferPool:
    """The ``role``'s pool of ``row``-element rows of ``dtype``, of at least ``rows`` rows."""
    key = (row, dtype, role)
    with _LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool.rows < rows:
            pool = _POOLS[key] = BufferPool((row,), _NUMPY[dtype], rows, keep=_KEEP_BUFFERS[role])
            while len(_POOLS) > _KEEP_SHAPES:
                _POOLS.popitem(last=False)
        _POOLS.move_to_end(key)
        return pool


def empty(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    memory_format: torch.memory_format = torch.contiguous_format,
    role: Role = "out",
) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` (2-D, or 4-D with ``memory_format``), reused on CPU.

    Args:
        shape: ``(rows, row)`` or ``(B, C, H, W)``; the leading dimension is the batch.
        dtype: Element type.
        device: Where; only CPU tensors come from a pool.
        memory_format: ``torch.contiguous_format`` or ``torch.channels_last`` (4-D only).
        role: ``"out"`` for what may be handed to the caller, ``"tmp"`` for what a step drops
            before it returns: separate pools, so batches a caller keeps never leave the
            intermediates without a free buffer.
    """
    if device.type != "cpu" or dtype not in _NUMPY or 0 in shape:
        return torch.empty(shape, dtype=dtype, device=device, memory_format=memory_format)
    last = memory_format == torch.channels_last
    stored = (shape[0], shape[2], shape[3], shape[1]) if last else shape
    row = math.prod(stored[1:])
    out = torch.from_numpy(_pool(row, dtype, shape[0], role).take(shape[0]))
    if dtype == torch.bfloat16:
        out = out.view(torch.bfloat16)
    out = out.view(stored)
    return out.permute(0, 3, 1, 2) if last else out
