"""Raw shard-file access (``preadv``, cached mmaps): the local store's, re-exported here.

The code lives in :mod:`precompute.storage.localio`, the storage layer's local implementation.
"""

from precompute.storage.localio import MAP_BYTES, MapCache, Stamp, file_stamp, preadv_all

__all__ = ["MAP_BYTES", "MapCache", "Stamp", "file_stamp", "preadv_all"]
