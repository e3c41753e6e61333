"""Reusable host batch buffers that are never handed out while still in use.

Freshly allocated multi-megabyte arrays cost page faults and kernel zeroing on every batch
(glibc returns large freed blocks to the OS), about as much CPU as reading the bytes. The pool
keeps up to ``keep`` buffers and hands out views of them; a buffer is reused only when the pool
holds the only reference to it (CPython reference count: every numpy view, sub-view and
``torch.from_numpy`` tensor of it keeps it referenced), i.e. after every tensor or array made
from that batch was dropped by the consumer. A batch the user keeps is therefore never overwritten;
it just leaves its buffer out of the rotation, and the pool allocates another.

Pageable buffers are anonymous memory maps, so every buffer starts on a page boundary (and
every row whose byte size is a multiple of 64 on a 64-byte boundary), where a large
``np.empty`` starts 16 bytes past a page (glibc's chunk header): copies (the kernel's behind
``preadv``, or ``memcpy``) into aligned destinations do not depend on how a chunk's offset in
its shard file is aligned. The mappings are private, as malloc'ed memory is.

With ``pin=True`` (CUDA only: page-locking needs the driver) the buffers are pinned host
memory, so the reader writes each batch where the device copy can DMA it from directly.
"""

from __future__ import annotations

import math
import mmap
import sys
import threading
import warnings

import numpy as np
import torch

__all__ = ["BufferPool", "page_aligned"]


class BufferPool:
    """Hand out ``(rows, *row_shape)`` arrays, reusing buffers nobody refers to any more.

    Args:
        row_shape: Shape of one row (one sample).
        dtype: Element type.
        rows: Rows per buffer (the batch size); smaller requests get a leading slice.
        keep: At most this many buffers are kept for reuse.
        pin: Allocate pinned (page-locked) host memory; needs CUDA.
    """

    def __init__(
        self,
        row_shape: tuple[int, ...],
        dtype: np.dtype | type,
        rows: int,
        keep: int,
        pin: bool = False,
    ) -> None:
        self.row_shape, self.dtype, self.rows, self.keep = row_shape, np.dtype(dtype), rows, keep
        self.pin, self._pin_failed = pin, False
        self._owned: list[np.ndarray] = []
        self._free_refs = 0  # the reference count of a buffer only the pool holds, measured
        self._lock = threading.Lock()
        self.allocated = 0  # buffers created so far (for tests and benchmarks)

    def take(self, rows: int) -> np.ndarray:
        """Return an uninitialised ``(rows, *row_shape)`` array not referenced elsewhere."""
        if not 0 < rows <= self.rows:
            raise ValueError(f"rows must be in [1, {self.rows}], got {rows}")
        with self._lock:
            for i in range(len(self._owned)):
                if sys.getrefcount(self._owned[i]) <= self._free_refs:
                    return self._owned[i][:rows]
            self.allocated += 1
            if len(self._owned) >= self.keep:  # over the bound: not kept, freed with its users
                return self._new()[:rows]
            self._owned.append(self._new())
            # measured the same way as above, so interpreter details (borrowed argument
            # references in newer CPythons) cancel out
            self._free_refs = sys.getrefcount(self._owned[-1])
            return self._owned[-1][:rows]

    def _new(self) -> np.ndarray:
        shape = (self.rows, *self.row_shape)
        if not self.pin:
            return page_aligned(shape, self.dtype)
        dtype = torch.from_numpy(np.empty(0, self.dtype)).dtype
        try:
            return torch.empty(shape, dtype=dtype, pin_memory=True).numpy()
        except RuntimeError as exc:  # e.g. the locked-memory limit: pageable memory still works
            if not self._pin_failed:
                self._pin_failed = True
                warnings.warn(
                    f"pinned host memory unavailable ({exc}); batches are staged "
                    "through pinned copy buffers instead",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return page_aligned(shape, self.dtype)


def page_aligned(shape: tuple[int, ...], dtype: np.dtype, huge: bool = False) -> np.ndarray:
    """Return an uninitialised array of ``shape`` in its own private anonymous mapping.

    ``huge``: ask the kernel for transparent huge pages (``MADV_HUGEPAGE``), as numpy does for
    its large arrays; for a large block that rows are gathered from at random
    (``io="ram"``: ``benchmarks.suite.spectral``'s ram row).

    The array's base is the ``mmap`` object, not another array, so numpy views of it keep
    the array itself referenced (the reference count :meth:`BufferPool.take` relies on), and
    the mapping is released with the last of them.
    """
    # private, as malloc'ed memory is: a forked child writing into its copy of a pooled
    # buffer must not write into the parent's (a shared mapping would)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    buffer = mmap.mmap(-1, max(math.prod(shape) * dtype.itemsize, 1), flags=flags)
    if huge and hasattr(mmap, "MADV_HUGEPAGE"):  # Linux; as numpy does for large arrays
        buffer.madvise(mmap.MADV_HUGEPAGE)
    return np.ndarray(shape, dtype, buffer)  # made on the mapping: views collapse onto it
