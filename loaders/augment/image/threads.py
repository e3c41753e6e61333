"""Worker threads for the CPU fast path, each with one intra-op (OpenMP) thread.

The fast path runs many small per-sample kernels. With torch's default intra-op parallelism
each of them forks and joins an OpenMP team; on an oversubscribed host (more runnable threads
than cores, e.g. next to DataLoader workers or other jobs) every join waits for a descheduled
thread and the path slows down tenfold. The workers here set their own OpenMP thread count to
one via ``omp_set_num_threads`` of the runtime torch loaded. That setting is per thread, so
unlike ``torch.set_num_threads`` it changes nothing for the caller or for threads created
later. The pools are a process-wide cache of resources keyed by size (no configuration lives
in them); they are dropped in a forked child.

:func:`scratch` gives each thread its own reused work buffers (a resized crop, the float32
image a half-type output is rounded from), so the per-sample kernels write into memory that is
already mapped and in cache instead of allocating, page-faulting and zeroing fresh blocks for
every sample; asked again for the same shape it returns the same tensor, so no per-sample
view is made either.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

__all__ = ["omp_runtime", "pool", "scratch"]

_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()
_SCRATCH = threading.local()
_OMP_NAMES = ("libgomp", "libiomp", "libomp")


def omp_runtime() -> ctypes.CDLL | None:
    """Return the OpenMP runtime this process loaded (Linux), or None if none is found."""
    maps = Path("/proc/self/maps")
    if not maps.is_file():
        return None
    for line in maps.read_text().splitlines():
        path = line.split()[-1]
        if any(name in os.path.basename(path) for name in _OMP_NAMES):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


def _single_threaded() -> None:
    """Pool initializer: finish torch's lazy thread setup, then use one OpenMP thread."""
    torch.get_num_threads()  # torch initialises this thread's count first; keep it from later
    runtime = omp_runtime()
    if runtime is not None:
        runtime.omp_set_num_threads(1)


def pool(threads: int) -> ThreadPoolExecutor:
    """Return the shared pool of ``threads`` single-OpenMP-thread workers."""
    with _LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(
                threads,
                thread_name_prefix=f"nostall-augment{threads}",
                initializer=_single_threaded,
            )
        return _POOLS[threads]


def scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Return this thread's work buffer ``name`` as a contiguous ``shape`` tensor.

    The buffer is reused by the next call with the same ``name`` on the same thread (grown
    when too small), so a caller must be done with it before asking again. Asked again with
    the same shape and dtype, it returns the very same tensor object: no view is made per call.
    """
    cache: dict[str, tuple[tuple[object, ...], torch.Tensor, torch.Tensor]] | None = getattr(
        _SCRATCH, "buffers", None
    )
    if cache is None:
        cache = _SCRATCH.buffers = {}
    key = (shape, dtype)
    entry = cache.get(name)
    if entry is not None and entry[0] == key:
        return entry[1]
    numel = math.prod(shape)
    flat = entry[2] if entry is not None else None
    if flat is None or flat.numel() < numel or flat.dtype != dtype:
        flat = torch.empty(numel, dtype=dtype)
    view = flat[:numel].view(shape)
    cache[name] = (key, view, flat)
    return view


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: forget the pools, renew the lock."""
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
