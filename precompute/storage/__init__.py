"""The storage layer: every store byte goes through one byte-store interface, two kinds of it.

- :mod:`~precompute.storage.base`: the :class:`ByteStore` interface (get, ranged get, put whole,
  put-if-absent, put-if-match, list with sizes and versions, delete; the build lock and the
  store's clock for coordination).
- :mod:`~precompute.storage.local` and :mod:`~precompute.storage.localio`: the local filesystem
  (atomic renames, ``preadv`` and ``mmap`` reads).
- :mod:`~precompute.storage.objects`: S3, GCS and Azure through obstore, with
  :mod:`~precompute.storage.signed` for the two requests obstore lacks and
  :mod:`~precompute.storage.objlock` for the build lock as an object.
- :mod:`~precompute.storage.location`: a store and a key, named by a path or a URL; the only
  module that reads a URL's scheme.
- :mod:`~precompute.storage.s3fsspec` (fsspec for URL sources) and
  :mod:`~precompute.storage.objupload` (a folder into a store) on top.

Nothing above this package tests a URL scheme or imports an object-store client.
"""

from precompute.storage.base import Blob, ByteStore, Meta, VersionChangedError
from precompute.storage.location import Location, is_url, location, open_array

__all__ = [
    "Blob",
    "ByteStore",
    "Location",
    "Meta",
    "VersionChangedError",
    "is_url",
    "location",
    "open_array",
]
