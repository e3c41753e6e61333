"""An xdist worker ends right after its Python exit handlers, skipping the interpreter's teardown.

After its last test a worker has sent every report. What is left is finalising an interpreter
that loaded torch, TensorFlow, JAX, DALI and Ray: measured at the end of a full run, about 4 s
of C-level teardown after the last exit handler (no Python frame on the stack), while the run
waits for it. Every exit handler registered after this module (Ray's,
torch's, multiprocessing's, the product's) still runs; then the process ends. Only in an xdist
worker (``config.workerinput``): a pytest that a test starts in a subprocess inherits
``PYTEST_XDIST_WORKER`` but keeps its own teardown and exit status.
"""

from __future__ import annotations

import atexit
import os
import sys

import pytest

_worker = False


def pytest_configure(config: pytest.Config) -> None:
    """Note whether this process is an xdist worker."""
    global _worker
    _worker = hasattr(config, "workerinput")


def _end_now() -> None:
    if _worker:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


atexit.register(_end_now)  # registered as the conftest loads: runs after every later handler
