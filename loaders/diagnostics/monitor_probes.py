"""What the monitor reads: one GPU through pynvml, and a process tree through psutil.

Both degrade instead of failing: :class:`GpuProbe` records why NVML is unavailable (no
library, no GPU, a driver error) and returns ``None`` for every figure; :class:`ProcessTree`
skips processes that vanished between listing and reading.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psutil

__all__ = ["GpuProbe", "ProcessTree"]


class GpuProbe:
    """Reads one GPU through pynvml; ``reason`` says why it is unavailable.

    Args:
        index: The GPU as torch numbers it (``cuda:index``); it is looked up in NVML by UUID,
            because NVML numbers GPUs in PCI order and ignores ``CUDA_VISIBLE_DEVICES``.
    """

    def __init__(self, index: int = 0) -> None:
        self.handle: Any = None
        self.name: str | None = None
        self.driver: str | None = None
        self.reason: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = _handle(pynvml, index)
            self.name = _text(pynvml.nvmlDeviceGetName(self.handle))
            self.driver = _text(pynvml.nvmlSystemGetDriverVersion())
            self._nvml = pynvml
        except Exception as exc:  # ImportError or any pynvml.NVMLError: degrade, say why
            self.handle = None
            self.reason = f"{type(exc).__name__}: {exc}"

    @property
    def available(self) -> bool:
        """Whether GPU samples can be taken."""
        return self.handle is not None

    def read(self) -> tuple[float | None, int | None, float | None]:
        """Return (utilisation %, memory used bytes, power W); None where NVML cannot say."""
        if self.handle is None:
            return None, None, None
        nv = self._nvml
        util = _try(lambda: float(nv.nvmlDeviceGetUtilizationRates(self.handle).gpu))
        mem = _try(lambda: int(nv.nvmlDeviceGetMemoryInfo(self.handle).used))
        power = _try(lambda: nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)
        return util, mem, power


def _handle(nv: Any, index: int) -> Any:
    """Return the NVML handle of torch's ``cuda:index`` (by UUID), else NVML's ``index``."""
    import torch

    if torch.cuda.is_available():
        try:
            uuid = str(torch.cuda.get_device_properties(index).uuid)
            return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except Exception:  # an older torch without .uuid, or MIG: fall back to the index
            pass
    return nv.nvmlDeviceGetHandleByIndex(index)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _try(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # a single unsupported query (e.g. power on some boards) -> None
        return None


class ProcessTree:
    """CPU seconds and resident memory of a process and all its descendants.

    Listing descendants scans every process on the machine, so it is redone only every
    ``refresh_s`` seconds; in between, the known processes are read directly. The last CPU time
    of every process ever seen is kept, so children that exited still count.

    Args:
        pid: Root process id.
        refresh_s: Seconds between re-listings of the descendants.
    """

    def __init__(self, pid: int, refresh_s: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.refresh_s = refresh_s
        self.seen: dict[int, float] = {}
        self.seen_io: dict[int, int] = {}
        self._procs = [self.root]
        self._listed = -float("inf")

    def _relist(self) -> None:
        self._listed = time.monotonic()
        with contextlib.suppress(psutil.Error):
            self._procs = [self.root, *self.root.children(recursive=True)]

    def read(self, relist: bool = False) -> tuple[float, int]:
        """Return (cumulative CPU seconds of every process seen, current RSS of the tree).

        Args:
            relist: List the descendants now, whatever the refresh interval.
        """
        if relist or time.monotonic() - self._listed >= self.refresh_s:
            self._relist()
        rss = 0
        for p in self._procs:
            try:
                with p.oneshot():
                    ct, mem = p.cpu_times(), p.memory_info()
            except psutil.Error:
                continue
            self.seen[p.pid] = ct.user + ct.system
            rss += mem.rss
        return sum(self.seen.values()), rss

    def storage_bytes(self) -> int | None:
        """Bytes the tree has fetched from storage so far (descendants that exited included).

        The kernel's count of bytes read from the block layer (``read_bytes`` of
        ``/proc/PID/io``): reads served by the page cache or from memory add nothing. None
        where the platform does not count them.
        """
        self._relist()
        for p in self._procs:
            try:
                self.seen_io[p.pid] = int(p.io_counters().read_bytes)
            except (psutil.Error, AttributeError, NotImplementedError):
                if p is self.root:
                    return None
        return sum(self.seen_io.values())

    def children_seconds(self) -> float:
        """Return the CPU seconds of the descendants seen so far (those that exited included)."""
        return sum(self.seen.values()) - self.seen.get(self.root.pid, 0.0)
