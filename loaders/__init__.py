"""loaders: stream a nostall store to the device, with on-device augmentation.

``from loaders import StoreLoader`` is the entry point; it is imported lazily so that
``import loaders.batching.order`` stays free of torch. ``loaders.tf`` (a ``tf.data.Dataset``)
and ``loaders.jax`` (batches of ``jax.Array``) are imported on first use too, so that
``import loaders`` imports neither TensorFlow nor JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["StoreLoader"]

if TYPE_CHECKING:
    from loaders.torch_loader import StoreLoader


def __getattr__(name: str) -> Any:
    if name == "StoreLoader":
        from loaders.torch_loader import StoreLoader

        return StoreLoader
    if name in ("tf", "jax"):  # the framework bridges: their backends load with them
        return importlib.import_module(f"loaders.{name}")
    raise AttributeError(f"module 'loaders' has no attribute {name!r}")
