"""``io="ram"``: the store read once into memory serves exactly the batches of ``io="pread"``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loaders import StoreLoader
from loaders.errors import CorruptChunkError, LoaderError
from tests.contracts.damage import image_shard
from tests.contracts.index_store import decode_index, make_index_store
from tests.contracts.loader_contract import assert_same_epochs, serve_epochs
from tests.loaders.v2stores import make_v2_index_store


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"prefetch": 0},
        {"rank": 2, "world_size": 3, "drop_last": False},
        {"shuffle": False, "drop_last": False},
    ],
)
def test_ram_serves_the_batches_pread_serves(tmp_path: Path, settings: dict[str, Any]) -> None:
    store = make_index_store(tmp_path / "s", 70, holes=(10, 11, 69))
    kw = {"seed": 3, "augment": None, **settings}
    ram = serve_epochs(StoreLoader(store, 6, io="ram", **kw), 3)
    assert_same_epochs(ram, serve_epochs(StoreLoader(store, 6, io="pread", **kw), 3))
    for batch in ram[1]:  # every served row is the sample its index names
        np.testing.assert_array_equal(decode_index(batch["image"]), batch["index"])


def test_ram_serves_every_field_of_a_v2_store(tmp_path: Path) -> None:
    store = make_v2_index_store(tmp_path / "v2", 37, holes=(4,))
    loader = StoreLoader(store, 5, seed=1, io="ram")
    assert set(loader._rows or {}) == {"image", "mask"}  # both streamed arrays in memory
    assert_same_epochs(
        serve_epochs(loader, 2), serve_epochs(StoreLoader(store, 5, seed=1, io="pread"), 2)
    )


def test_ram_resumes_mid_epoch_like_pread(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 50)
    first = StoreLoader(store, 4, seed=5, augment=None, io="ram")
    it = iter(first)
    for _ in range(3):
        next(it)
    state = first.state_dict()
    resumed = {}
    for io in ("ram", "pread"):
        loader = StoreLoader(store, 4, seed=5, augment=None, io=io)
        loader.load_state_dict(state)
        resumed[io] = [b["index"].tolist() for b in loader]
    assert resumed["ram"] == resumed["pread"] and len(resumed["ram"]) == 12 - 3


def test_ram_over_the_budget_or_with_variants_is_refused(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 40)  # 40 x 16 x 16 x 3 bytes of image
    with pytest.raises(LoaderError, match=r"io='ram' needs 30720 bytes .* over map_bytes=1000"):
        StoreLoader(store, 4, io="ram", map_bytes=1000)
    variants = make_index_store(tmp_path / "k", 20, variants=2)
    with pytest.raises(LoaderError, match="io='ram' reads stores without variants"):
        StoreLoader(variants, 4, io="ram")
    with pytest.raises(ValueError, match=r"io must be one of \('auto', 'pread', 'mmap', 'ram'\)"):
        StoreLoader(store, 4, io="memory")


def test_ram_checks_every_chunk_when_it_loads(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 40)
    shard = image_shard(store, 1)
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptChunkError, match="crc32c"):
        StoreLoader(store, 4, io="ram")  # at open: nothing unchecked is ever served


def test_after_close_the_same_batches_come_from_the_chunks(tmp_path: Path) -> None:
    store = make_index_store(tmp_path / "s", 30)
    loader = StoreLoader(store, 4, seed=2, augment=None, io="ram")
    before = [b["index"].tolist() for b in loader]
    loader.close()  # the rows are dropped with the mappings
    assert loader._rows is None
    loader.set_epoch(0)
    assert [b["index"].tolist() for b in loader] == before
