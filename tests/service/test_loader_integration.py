"""The loader path: resolve (source, spec) through the cache, stream it with StoreLoader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from loaders.errors import LoaderError
from loaders.torch_loader import StoreLoader
from service import Cache, resolve
from tests.service.helpers import SPEC, index_builder, make_source


def test_resolved_store_streams_and_is_leased_while_read(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=index_builder())
    path, lease = resolve((str(source), SPEC), cache=cache)
    with lease:
        loader = StoreLoader(path, batch_size=4, shuffle=False, drop_last=False)
        seen = []
        for batch in loader:
            assert cache.gc(budget_bytes=0).evicted == ()  # leased: never evicted mid-epoch
            for image, index in zip(batch["image"], batch["index"], strict=True):
                assert torch.all(image == int(index) % 251)  # pixels encode the slot index
                seen.append(int(index))
        assert sorted(seen) == list(range(12))
    assert not lease.held
    assert cache.gc(budget_bytes=0).evicted == (cache.key_for(source, SPEC),)


def test_store_loader_takes_a_cache_reference(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=index_builder())
    key = cache.key_for(source, SPEC)
    with StoreLoader((str(source), SPEC), batch_size=4, shuffle=False, cache=cache) as loader:
        indexes = [int(i) for batch in loader for i in batch["index"]]
        assert sorted(indexes) == list(range(12))
        assert cache.gc(budget_bytes=0).evicted == ()  # leased while the loader is open
        by_key = StoreLoader(key, batch_size=4, shuffle=False, cache=cache)
        assert by_key.source.info.spec_hash == loader.source.info.spec_hash
        by_key.close()
    assert cache.gc(budget_bytes=0).evicted == (key,)


def test_a_closed_cache_loader_refuses_to_read_its_store_no_longer_leased(
    tmp_path: Path,
) -> None:
    """Not a "corrupt store" once the cache evicted it: the close is named, at once."""
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=index_builder())
    loader = StoreLoader((str(source), SPEC), batch_size=4, shuffle=False, cache=cache)
    next(iter(loader))
    loader.close()
    loader.close()  # idempotent
    with pytest.raises(LoaderError, match=r"was closed: its cache lease on .* was released"):
        next(iter(loader))
    on_disk = StoreLoader(loader._leased, batch_size=4, shuffle=False)  # a path: no lease
    on_disk.close()
    assert len(list(on_disk)) == 3  # a store on disk is read again after close()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"io": "bogus"}, "io must be one of ('auto', 'pread', 'mmap', 'ram'), got 'bogus'"),
        ({"rank": 0, "world_size": 13}, "13 ranks share 12 samples: every rank would get none"),
    ],
)
def test_a_loader_refused_after_resolving_releases_its_lease(
    tmp_path: Path, kw: dict[str, Any], message: str
) -> None:
    source = make_source(tmp_path / "src")
    cache = Cache(tmp_path / "cache", builder=index_builder())
    key = cache.key_for(source, SPEC)
    with pytest.raises(ValueError) as info:
        StoreLoader((str(source), SPEC), batch_size=4, cache=cache, **kw)
    # ``info`` keeps the error referenced (as a log or a framework's traceback would), and its
    # frames the half-made loader: the lease must have been released on the way out regardless
    assert cache.gc(budget_bytes=0).evicted == (key,)
    assert str(info.value).startswith(message)
