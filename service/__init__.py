"""service: the cache of built stores, keyed by (source fingerprint, build spec).

``Cache(root, budget_bytes=...)`` builds each (source, spec) at most once across processes,
evicts least-recently-used stores under a byte budget and never evicts a leased store (the root
may be a folder or an ``s3://bucket/prefix``);
``resolve`` hands a loader a store path plus a lease; ``python -m service`` serves the HTTP API.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from service.cache.builders import Builder, BuildRequest, precompute_builder
from service.cache.catalog import Entry
from service.cache.keys import is_key, source_fingerprint, store_key
from service.cache.store import Cache, GcReport, StoreRef
from service.coord.lease import Lease
from service.errors import (
    BuildFailedError,
    CacheKeyError,
    QueueFullError,
    ServiceError,
    SourceNotAllowedError,
    StoreInUseError,
)
from service.resolve import default_cache_root, resolve

# The modules that moved into sub-packages, by their old names (issue 28): ``import
# service.objclaim`` still works and gives the very module ``service.coord.objclaim``.
_GROUPS = {
    "cache": "catalog objcatalog keys builders metrics eviction maintenance",
    "coord": "lease objholder objclaim objlease",
    "http": "app bodies server jobs paths web",
}
MOVED = {f"service.{m}": f"service.{g}.{m}" for g, ms in _GROUPS.items() for m in ms.split()}
MOVED |= {"service.objcache": "service.cache", "service.objevict": "service.cache.eviction"}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import a moved module (or one under a moved package) by its old name: the same object."""

    @staticmethod
    def _new_name(fullname: str) -> str | None:
        old = ".".join(fullname.split(".")[:2])
        return MOVED[old] + fullname[len(old) :] if old in MOVED else None

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old module name; None for every other name."""
        if self._new_name(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """Import the module under its new name and hand it out under the old one."""
        module = importlib.import_module(self._new_name(spec.name) or spec.name)
        spec.loader_state = module.__spec__  # the import machinery sets __spec__ to ours
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run (the module ran under its new name): give it back its own spec."""
        spec = module.__spec__
        if spec is not None and spec.loader is self:
            module.__spec__ = spec.loader_state


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())

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
