"""service.cache: the cache of built stores, its catalog, keys, builders and eviction.

:mod:`~service.cache.store` (:class:`Cache`), :mod:`~service.cache.catalog` (the layout of a
cache root and its entries), :mod:`~service.cache.keys` (cache keys), :mod:`~service.cache.builders`
(the build request and the default builder), :mod:`~service.cache.eviction` (removal and LRU
eviction), :mod:`~service.cache.maintenance` (trash, debris, progress),
:mod:`~service.cache.metrics` (counters). The names of :mod:`~service.cache.store` are
importable from here too (``from service.cache import Cache``), as when the cache was one module.
"""

from typing import Any

__all__ = ["Cache", "GcReport", "StoreLease", "StoreRef"]


def __getattr__(name: str) -> Any:
    """The names of :mod:`service.cache.store` (imported when first asked for).

    ``ObjectCache`` is a deprecated name of :class:`Cache`, which runs on a root in object
    storage too (``Cache("s3://bucket/prefix")``).
    """
    if name == "ObjectCache":
        import warnings

        warnings.warn(
            "ObjectCache is Cache: one class runs on a folder or an s3:// root",
            DeprecationWarning,
            stacklevel=2,
        )
        name = "Cache"
    if name in __all__:
        from service.cache import store

        return getattr(store, name)
    raise AttributeError(f"module 'service.cache' has no attribute {name!r}")
