"""service: the cache of built stores, keyed by (source fingerprint, build spec).

``Cache(root, budget_bytes=...)`` builds each (source, spec) at most once across processes,
evicts least-recently-used stores under a byte budget and never evicts a leased store (the root
may be a folder or an ``s3://bucket/prefix``);
``resolve`` hands a loader a store path plus a lease; ``python -m service`` serves the HTTP API.
"""

from service.builders import Builder, BuildRequest, precompute_builder
from service.cache import Cache, GcReport, StoreRef
from service.catalog import Entry
from service.errors import (
    BuildFailedError,
    CacheKeyError,
    QueueFullError,
    ServiceError,
    SourceNotAllowedError,
    StoreInUseError,
)
from service.keys import is_key, source_fingerprint, store_key
from service.lease import Lease
from service.resolve import default_cache_root, resolve

__all__ = [
    "BuildFailedError",
    "BuildRequest",
    "Builder",
    "Cache",
    "CacheKeyError",
    "Entry",
    "GcReport",
    "Lease",
    "QueueFullError",
    "ServiceError",
    "SourceNotAllowedError",
    "StoreInUseError",
    "StoreRef",
    "default_cache_root",
    "is_key",
    "precompute_builder",
    "resolve",
    "source_fingerprint",
    "store_key",
]
