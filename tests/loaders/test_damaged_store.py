"""Damaged stores (a complete store whose files were later lost, cut or swapped): the loaders
raise an error naming the file, never serve fill values, fewer samples or another shard's data.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec

from loaders import StoreLoader
from loaders.errors import (
    ChunkReadError,
    CorruptChunkError,
    LoaderError,
    StoreMetadataError,
    StoreOpenError,
)
from loaders.store.open_store import open_store
from loaders.store.shardio import IO_MODES, VERIFY_MODES, ShardedArrayReader
from tests.contracts.damage import (
    META_DAMAGE,
    SHARD_DAMAGE,
    SWAP_DAMAGE,
    cut,
    delete,
    image_shard,
    replace,
)
from tests.contracts.loader_contract import collect, decode_index, make_index_store

# 40 samples, shards of 16 (the last holds 8), chunks of 4: three shards per array


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("damage") / "s", 40)


@pytest.fixture
def root(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "s"))


@pytest.mark.parametrize("verify", VERIFY_MODES)
@pytest.mark.parametrize("io", IO_MODES)
@pytest.mark.parametrize("damage", SHARD_DAMAGE)
def test_loader_refuses_a_damaged_store_naming_the_file(
    root: Path, damage: str, io: str, verify: str
) -> None:
    bad = SHARD_DAMAGE[damage](root)
    with pytest.raises(StoreOpenError, match=re.escape(str(bad))):
        StoreLoader(root, 8, shuffle=False, io=io, verify=verify)


def test_a_sound_store_opens_and_serves_every_sample(root: Path) -> None:
    for io in IO_MODES:
        batches = collect(StoreLoader(root, 8, shuffle=False, io=io))
        assert np.concatenate([decode_index(b["image"]) for b in batches]).tolist() == list(
            range(40)
        )


AFTER_OPEN: dict[str, Callable[[Path], Path]] = {
    "deleted": lambda r: delete(image_shard(r, 1)),
    "replaced by the last shard": lambda r: replace(image_shard(r, 1), image_shard(r, 2)),
    "replaced by an empty file": lambda r: cut(
        replace(image_shard(r, 1), r / "zarr.json"), lambda n: 0
    ),
}


@pytest.mark.parametrize("verify", VERIFY_MODES)
@pytest.mark.parametrize("io", IO_MODES)
@pytest.mark.parametrize("damage", AFTER_OPEN)
@pytest.mark.parametrize("read_first", [False, True], ids=["unread", "read"])
def test_shard_lost_while_streaming_raises_naming_it(
    root: Path, damage: str, io: str, verify: str, read_first: bool
) -> None:
    loader = StoreLoader(root, 8, shuffle=False, io=io, verify=verify, prefetch=0)
    if read_first:  # indexes cached, chunks verified, shard files mapped
        assert len(collect(loader)) == 5
    bad = AFTER_OPEN[damage](root)
    with pytest.raises(LoaderError, match=re.escape(str(bad))) as info:
        collect(loader)
    assert isinstance(info.value, ChunkReadError)


_SIGBUS_PROBE = """
import os, sys
from pathlib import Path
from loaders import StoreLoader
from loaders.errors import CorruptChunkError
root, verify, keep = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
shard = root / "image" / "c" / "1" / "0" / "0" / "0"
loader = StoreLoader(root, 8, shuffle=False, io="mmap", verify=verify, prefetch=0)
list(loader)  # every shard file mapped
os.truncate(shard, 0 if keep == "0" else shard.stat().st_size // 2)  # in place, while mapped
try:
    list(loader)
except CorruptChunkError as exc:
    print("ERROR", exc)
"""


@pytest.mark.parametrize("verify", VERIFY_MODES)
@pytest.mark.parametrize("keep", ["0", "half"])
def test_mmap_shard_cut_while_mapped_is_an_error_not_sigbus(
    root: Path, verify: str, keep: str
) -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(
        [sys.executable, "-c", _SIGBUS_PROBE, str(root), verify, keep],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"probe died with {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("ERROR") and "image/c/1/0/0/0" in proc.stdout
    assert "truncated" in proc.stdout or "bytes" in proc.stdout


def test_dali_store_loader_refuses_a_missing_shard(root: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from loaders.dali import DaliStoreLoader

    bad = SHARD_DAMAGE["image shard deleted"](root)
    with pytest.raises(StoreOpenError, match=re.escape(str(bad))):
        DaliStoreLoader(root, 8, device="cpu")


def test_dali_store_loader_raises_for_a_shard_lost_while_streaming(root: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from loaders.dali import DaliStoreLoader

    loader = DaliStoreLoader(root, 8, device="cpu", shuffle=False)
    bad = AFTER_OPEN["deleted"](root)
    with pytest.raises(LoaderError, match=re.escape(str(bad))):
        for _ in loader:
            pass


def test_reader_of_a_complete_store_never_reads_fill_values(root: Path) -> None:
    source = open_store(root)
    image_shard(root, 2).unlink()
    with pytest.raises(CorruptChunkError, match="shard file is missing"):
        source.image.read_chunk((8, 0, 0, 0))
    # a generic array (no complete=True) still reads a missing shard as its fill value
    generic = ShardedArrayReader(root / "image")
    assert not generic.read_chunk((8, 0, 0, 0)).any()


def test_zarr_fallback_of_a_complete_array_refuses_a_missing_shard(tmp_path: Path) -> None:
    z = zarr.create_array(
        tmp_path / "z", shape=(32, 3), chunks=(4, 3), shards=(16, 3), dtype="int32", fill_value=-5
    )  # zstd: read through zarr-python
    z[:] = np.arange(96).reshape(32, 3)
    (tmp_path / "z" / "c" / "1" / "0").unlink()
    reader = ShardedArrayReader(tmp_path / "z", complete=True)
    assert not reader.fast
    assert reader.read_chunk((0, 0))[0].tolist() == [0, 1, 2]
    with pytest.raises(CorruptChunkError, match=r"z/c/1/0.*shard file is missing"):
        reader.read_chunk((4, 0))
    assert ShardedArrayReader(tmp_path / "z").read_chunk((4, 0)).tolist() == [[-5] * 3] * 4


def test_complete_reader_refuses_a_chunk_missing_from_its_index(tmp_path: Path) -> None:
    z = zarr.create_array(
        tmp_path / "z",
        shape=(32,),
        chunks=(4,),
        shards=(16,),
        dtype="int64",
        compressors=[Crc32cCodec()],
        filters=None,
        fill_value=-1,
    )
    z[:] = np.r_[[-1] * 4, np.arange(28)]  # chunk 0 holds only fill values: not written
    reader = ShardedArrayReader(tmp_path / "z", complete=True)
    with pytest.raises(CorruptChunkError, match=r"missing from the shard index|a complete shard"):
        reader.read_chunk((0,))


@pytest.mark.parametrize("damage", META_DAMAGE)
def test_broken_metadata_is_one_store_metadata_error_naming_file_and_key(
    root: Path, damage: str
) -> None:
    bad, key = META_DAMAGE[damage](root)
    with pytest.raises(StoreMetadataError) as info:
        StoreLoader(root, 8)
    message = str(info.value)
    assert str(bad) in message and "\n" not in message
    assert f"key '{key}'" in message if key else "unreadable" in message or "object" in message


@pytest.mark.parametrize("damage", SWAP_DAMAGE)
def test_same_size_swap_is_not_caught_by_the_loader(root: Path, damage: str) -> None:
    # documented limit (docs/FORMAT.md): every chunk of a swapped shard is self-consistent
    # and the sizes agree, so only `precompute verify` (shard digests) catches this
    SWAP_DAMAGE[damage](root)
    assert len(collect(StoreLoader(root, 8, shuffle=False))) == 5
