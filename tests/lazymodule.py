"""A module imported on its first attribute read, so collecting a test module stays cheap.

Every xdist worker imports every test module to collect it; TensorFlow alone is about 2 s of
CPU a worker. A test module binds ``tf = LazyModule("tensorflow")`` (and imports the real module
under ``TYPE_CHECKING`` for the type checker): only the worker that runs its tests pays.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    """The module ``name``, imported when a public attribute of it is first read.

    Names that start with an underscore are never looked up in the module: pytest reads
    ``__test__``, ``__wrapped__``, ``__bases__`` and ``_mock_name`` of every module-level name
    while it collects, and that must not import it.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's probes at collection (__test__, __wrapped__, ...)
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
