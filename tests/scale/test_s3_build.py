"""`precompute build --out s3://...` against a real S3-compatible server: same protocol as disk.

A build killed mid-way and resumed, on disk and in object storage alike:
``tests/precompute/test_resume.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.format.layout import FIELDS, MARKER_DIR
from precompute.format.verify import verify_store
from precompute.sample import make_sample_dataset
from precompute.storage import objstore
from precompute.storage.objupload import put_folder

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NUM = 120
FLAGS = ["--size", "32", "--shard-samples", "4", "--chunk-samples", "2", "--seed", "7", "--quiet"]


def _build(src: Path | str, out: str) -> subprocess.Popen[bytes]:
    """A real build process on its own local Ray (AWS_* from the test server's environment)."""
    argv = [sys.executable, "-m", "precompute.cli", "build", str(src), "--out", out, *FLAGS]
    env = {**os.environ, "RAY_ADDRESS": "local"}
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, start_new_session=True)


def _finish(child: subprocess.Popen[bytes]) -> None:
    _, err = child.communicate(timeout=240)
    assert child.returncode == 0, err.decode()


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_dataset(tmp_path_factory.mktemp("src"), NUM, size_range=(96, 256), seed=4)


@pytest.fixture(scope="module")
def local_store(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "store"
    _finish(_build(src, str(out)))
    return out


def _local_files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for name in FIELDS
        for p in sorted((out / name).rglob("*"))
        if p.is_file()
    }


def _s3_files(url: str) -> dict[str, bytes]:
    return {
        obj[len(url) + 1 :]: objstore.get_range(obj).data
        for obj in objstore.list_sizes(url)
        if obj[len(url) + 1 :].split("/", 1)[0] in FIELDS
    }


def test_build_into_s3_is_byte_identical_and_published_last(
    bucket: str, src: Path, local_store: Path
) -> None:
    url = f"{bucket}/stores/train.zarr"
    _finish(_build(src, url))
    assert _s3_files(url) == _local_files(local_store)
    attrs = json.loads(objstore.get_range(f"{url}/zarr.json").data)["attributes"]["nostall"]
    assert attrs["complete"] and attrs["report"]["shards_built"] == NUM // 4
    assert 0 < attrs["report"]["bytes_written"] <= sum(objstore.list_sizes(url).values())
    assert f"{url}/{MARKER_DIR}/build.lock" not in objstore.list_sizes(url)  # released
    assert verify_store(url) == []


def test_build_from_s3_into_s3_holds_the_samples_of_the_local_build(
    bucket: str, src: Path, local_store: Path
) -> None:
    put_folder(src, f"{bucket}/raw")
    url = f"{bucket}/stores/from-s3.zarr"
    _finish(_build(f"{bucket}/raw", url))
    assert _s3_files(url) == _local_files(local_store)  # same slots, pixels, labels and keys
    attrs = json.loads(objstore.get_range(f"{url}/zarr.json").data)["attributes"]["nostall"]
    assert attrs["report"]["source"] == f"{bucket}/raw" and attrs["report"]["num_inputs"] == NUM
    assert verify_store(url) == []
