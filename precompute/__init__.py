"""precompute: decode a raw dataset once into a sharded Zarr v3 store (see docs/FORMAT.md)."""

from precompute.errors import (
    BuildLockedError,
    DecodeError,
    PrecomputeError,
    SourceError,
    SpecError,
    StoreError,
    StoreIncompleteError,
    StoreMismatchError,
)
from precompute.format import FORMAT_VERSION, StoreInfo, StoreLayout, open_store_info
from precompute.spec import AugmentPolicy, BuildSpec

# Bumped whenever decoding or a stage changes the bytes it produces; part of the cache key.
TRANSFORM_VERSION = "1"

__all__ = [
    "FORMAT_VERSION",
    "TRANSFORM_VERSION",
    "AugmentPolicy",
    "BuildLockedError",
    "BuildSpec",
    "DecodeError",
    "PrecomputeError",
    "SourceError",
    "SpecError",
    "StoreError",
    "StoreIncompleteError",
    "StoreInfo",
    "StoreLayout",
    "StoreMismatchError",
    "open_store_info",
]
