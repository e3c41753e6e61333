"""The coordination of a cache is picked from the byte store under its root, and old paths work.

A local root gets file locks the kernel releases (a claim held by another process is ``held``,
a second ``try_claim`` in this process is refused like any other holder's), the moved modules
still import by their old names as the very same modules, and ``ObjectCache`` is a deprecated
name of ``Cache``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from service import Cache
from service.coord.base import HeldClaim
from service.coord.local import LocalCoordinator


def test_a_folder_root_gets_file_locks_that_exclude_and_release(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", builder=lambda request: None)
    coord = cache.coord
    assert isinstance(coord, LocalCoordinator)
    claim = coord.try_claim("k")
    assert isinstance(claim, HeldClaim) and claim.still_mine()
    assert coord.claim_state("k") == "held"  # another lock object on the same file is refused
    assert coord.try_claim("k") is None
    claim.release()
    assert not claim.still_mine() and coord.claim_state("k") == "free"
    assert (tmp_path / "cache" / "locks" / "k.lock").exists()


def test_a_held_lease_fails_the_eviction_guard_until_released(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", builder=lambda request: None)
    with cache.coord.guard("k") as guard:
        assert guard.free() and guard.still_free()
    lease = cache.coord.lease("k", tmp_path)
    with cache.coord.guard("k") as guard:
        assert not guard.free()
    lease.release()
    with cache.coord.guard("k") as guard:
        assert guard.free()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("service.objclaim", "service.coord.objclaim"),
        ("service.lease", "service.coord.lease"),
        ("service.catalog", "service.cache.catalog"),
        ("service.app", "service.http.app"),
        ("service.web.page", "service.http.web.page"),
    ],
)
def test_moved_modules_import_by_their_old_names(old: str, new: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__ is not None and module.__spec__.name == new  # its own spec, kept


def test_object_cache_is_a_deprecated_name_of_cache() -> None:
    with pytest.warns(DeprecationWarning, match="ObjectCache is Cache"):
        from service.objcache import ObjectCache
    assert ObjectCache is Cache
