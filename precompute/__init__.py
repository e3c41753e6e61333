"""precompute: decode a raw dataset once into a sharded Zarr v3 store (see docs/FORMAT.md)."""

import importlib
from typing import Any

from precompute.errors import (
    BuildError,
    BuildLockedError,
    ClusterError,
    DecodeError,
    InputError,
    PrecomputeError,
    SourceError,
    SpecError,
    StoreError,
    StoreIncompleteError,
    StoreMismatchError,
)
from precompute.format.layout import FORMAT_VERSION, StoreInfo, StoreLayout, open_store_info
from precompute.spec import AugmentPolicy, BuildSpec

# Bumped whenever decoding or a stage changes the bytes it produces; part of the cache key.
TRANSFORM_VERSION = "2"

# Lazily imported public API: ``import precompute`` must not import Ray (or fsspec backends).
_LAZY = {
    "build": "precompute.job",
    "list_source": "precompute.sources.classes",
    "fingerprint": "precompute.sources.classes",
    "Source": "precompute.sources.classes",
    "make_sample_dataset": "precompute.sample",
}


def __getattr__(name: str) -> Any:
    """Import ``build``, ``list_source``, ``fingerprint``, ... on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'precompute' has no attribute {name!r}")


__all__ = [
    "FORMAT_VERSION",
    "TRANSFORM_VERSION",
    "AugmentPolicy",
    "BuildError",
    "BuildLockedError",
    "BuildSpec",
    "ClusterError",
    "DecodeError",
    "InputError",
    "PrecomputeError",
    "Source",
    "SourceError",
    "SpecError",
    "StoreError",
    "StoreIncompleteError",
    "StoreInfo",
    "StoreLayout",
    "StoreMismatchError",
    "build",
    "fingerprint",
    "list_source",
    "make_sample_dataset",
    "open_store_info",
]
