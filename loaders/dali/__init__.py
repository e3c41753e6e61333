"""DALI loaders behind the ``StoreLoader`` contract (optional extra: ``nostall[dali]``).

* :class:`DaliStoreLoader` streams a nostall store through a DALI augmentation pipeline.
* :class:`JpegLoader` decodes a raw image folder or manifest with DALI (no precompute step).
* :class:`DaliAugment` is their on-device augmentation policy.

Importing this package does not import DALI; constructing a loader does, and raises an
``ImportError`` naming ``pip install 'nostall[dali]'`` when DALI is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["DaliAugment", "DaliStoreLoader", "JpegLoader"]

if TYPE_CHECKING:
    from loaders.dali.jpeg import JpegLoader
    from loaders.dali.params import DaliAugment
    from loaders.dali.store import DaliStoreLoader

_WHERE = {
    "DaliAugment": "loaders.dali.params",
    "DaliStoreLoader": "loaders.dali.store",
    "JpegLoader": "loaders.dali.jpeg",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'loaders.dali' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
