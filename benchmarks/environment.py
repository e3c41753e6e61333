"""Record the environment a benchmark ran in: CPU, cores, memory, GPU, driver, versions."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

import psutil

from loaders.diagnostics.diagnose import usable_cores
from loaders.monitor import GpuProbe

__all__ = ["cpu_model", "environment", "environment_line", "usable_cores"]

PACKAGES = (
    "nostall",
    "torch",
    "numpy",
    "zarr",
    "ray",
    "pillow",
    "nvidia-dali-cuda120",
    "nvidia-ml-py",
    "psutil",
)


def cpu_model() -> str:
    """Return the CPU model name (from /proc/cpuinfo where available)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _gpu() -> dict[str, Any]:
    probe = GpuProbe()
    info: dict[str, Any] = {
        "name": probe.name,
        "driver": probe.driver,
        "nvml": "ok" if probe.available else probe.reason,
    }
    try:
        import torch

        info["cuda_available"] = torch.cuda.is_available()
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["torch_device"] = torch.cuda.get_device_name(0)
    except ImportError:
        info["cuda_available"] = False
    return info


def environment() -> dict[str, Any]:
    """Return a JSON-ready description of this machine and the package versions."""
    return {
        "cpu": cpu_model(),
        "cores_logical": psutil.cpu_count(),
        "cores_physical": psutil.cpu_count(logical=False),
        "cores_usable": usable_cores(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "gpu": _gpu(),
        "versions": {name: _version(name) for name in PACKAGES},
    }


def environment_line() -> str:
    """Return one line of the machine: CPU, memory, and whether CUDA is available."""
    import torch

    env = environment()
    keep: dict[str, Any] = {k: env[k] for k in ("cpu", "cores", "memory_gib") if k in env}
    keep["cuda"] = torch.cuda.is_available()
    return " ".join(f"{k}={v}" for k, v in keep.items())
