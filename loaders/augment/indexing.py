"""Advanced indexing that works for every stored dtype on every device.

CUDA's advanced-index kernel (``x[b, rows, cols]``) is not built for ``uint16``, ``uint32``
and ``uint64`` (torch 2.11 on an H200: ``"index_cuda" not implemented for 'UInt16'``), while
16-bit unsigned rasters and label maps are common stored dtypes. An index only moves bits, so
such a tensor is indexed as the signed integer of the same width and viewed back: same bits,
same result on CPU and CUDA, no copy.
"""

from __future__ import annotations

import torch

__all__ = ["take_index"]

_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def take_index(values: torch.Tensor, index: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``values[index]`` (an advanced index), for any dtype, on any device."""
    signed = _SIGNED.get(values.dtype)
    if signed is None:
        return values[index]
    return values.view(signed)[index].view(values.dtype)
