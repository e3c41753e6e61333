"""loaders: stream a nostall store to the device, with on-device augmentation.

``from loaders import StoreLoader`` is the entry point; it is imported lazily so that
``import loaders.batching.order`` stays free of torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["StoreLoader"]

if TYPE_CHECKING:
    from loaders.torch_loader import StoreLoader


def __getattr__(name: str) -> Any:
    if name == "StoreLoader":
        from loaders.torch_loader import StoreLoader

        return StoreLoader
    raise AttributeError(f"module 'loaders' has no attribute {name!r}")
