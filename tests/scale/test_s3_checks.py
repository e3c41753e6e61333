"""`precompute verify` and `inspect` on a store in each real object server (S3, Azure Blob)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from precompute import StoreIncompleteError, open_store_info
from precompute.format.layout import MARKER_DIR
from precompute.format.summary import store_summary
from precompute.format.verify import verify_store
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from tests.contracts.loader_contract import make_index_store


@pytest.fixture(scope="module")
def local_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_index_store(tmp_path_factory.mktemp("s3c") / "store", 40)


@pytest.fixture
def s3_store(any_bucket: str, local_store: Path) -> str:
    """The store in each object server in turn (S3, Azure Blob)."""
    put_folder(local_store, f"{any_bucket}/v.zarr")
    return f"{any_bucket}/v.zarr"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "precompute.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_verify_and_inspect_take_s3_urls(s3_store: str, local_store: Path) -> None:
    assert verify_store(s3_store) == [] == verify_store(local_store)
    done = _cli("verify", s3_store)
    assert done.returncode == 0 and done.stdout.strip() == f"OK {s3_store}", done.stderr
    shown = _cli("inspect", s3_store)
    assert shown.returncode == 0 and f"store      {s3_store}" in shown.stdout
    assert "status     complete" in shown.stdout and "40 slots, 40 valid" in shown.stdout


def test_verify_names_a_swapped_and_a_missing_object(s3_store: str) -> None:
    one, two = f"{s3_store}/image/c/1/0/0/0", f"{s3_store}/image/c/0/0/0/0"
    location(one).write_bytes(location(two).read_bytes())  # self-consistent, wrong shard
    location(f"{s3_store}/key/c/2").delete()
    problems = verify_store(s3_store)
    assert any(
        f"shard 1: image: shard file {one} is not the file its build wrote" in p for p in problems
    ), problems
    assert any(f"shard 2: key: shard file is missing ({s3_store}/key/c/2" in p for p in problems), (
        problems
    )
    done = _cli("verify", s3_store)
    assert done.returncode == 1 and done.stderr.count("BAD ") == len(problems)


def test_an_incomplete_s3_store_is_refused_and_inspected(s3_store: str) -> None:
    meta = f"{s3_store}/zarr.json"
    doc = json.loads(location(meta).read_bytes())
    doc["attributes"]["nostall"]["complete"] = False
    location(meta).write_bytes(json.dumps(doc).encode())
    location(f"{s3_store}/{MARKER_DIR}/shards/000001.json").delete()
    with pytest.raises(StoreIncompleteError, match=f"{s3_store}: store is incomplete"):
        open_store_info(s3_store)
    assert "INCOMPLETE (2/3 shards written" in store_summary(s3_store)
