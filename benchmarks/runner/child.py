"""The child side of a :class:`~benchmarks.runner.rows.Command`: one function, one JSON line.

``python -m benchmarks.runner.child MODULE:FUNCTION [ARG ...]`` imports ``MODULE``, calls
``FUNCTION(*ARGS)`` and prints one JSON line: the figures the function returned, plus
``imports_s`` (the import of ``MODULE`` and what the function reports as its own lazy
imports), ``call_s`` (the rest of the call) and ``peak_rss_mib`` (this process's own peak).
This module imports only the standard library (its package adds psutil), so the imports
counted are the function's.
"""

from __future__ import annotations

import importlib
import json
import sys
import time

__all__ = ["main", "peak_rss_mib"]


def peak_rss_mib() -> float:
    """This process's peak RSS in MiB, since it started its program.

    On Linux ``VmHWM`` of ``/proc/self/status``: the peak of this process's own memory map.
    ``getrusage(RUSAGE_SELF).ru_maxrss`` is not that in a child started by ``subprocess``: Linux
    carries the peak of the forked copy of the parent (its whole RSS) across ``execve``, so a
    child of a large parent reports the parent's size. Elsewhere ``ru_maxrss`` (KiB on Linux,
    bytes on macOS).
    """
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def main(argv: list[str]) -> None:
    """Import and call ``argv[0]`` (``MODULE:FUNCTION``) with ``argv[1:]``; print its figures."""
    t0 = time.perf_counter()
    module, _, name = argv[0].partition(":")
    function = getattr(importlib.import_module(module), name)
    t1 = time.perf_counter()
    figures = dict(function(*argv[1:]) or {})
    t2 = time.perf_counter()
    lazy = float(figures.pop("imports_s", 0.0))
    figures.update(imports_s=t1 - t0 + lazy, call_s=t2 - t1 - lazy, peak_rss_mib=peak_rss_mib())
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
