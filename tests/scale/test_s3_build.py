"""`precompute build --out s3://...` (or ``az://``) against real object servers (S3 on moto, Azure
Blob on Azurite): the same protocol as disk.

A build killed mid-way and resumed, on disk and in object storage alike:
``tests/precompute/test_resume.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from precompute import BuildSpec, build
from precompute.format.layout import FIELDS, MARKER_DIR
from precompute.format.verify import verify_store
from precompute.sample import make_sample_dataset
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from tests.objectservers import objects_under

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NUM = 120
SPEC = BuildSpec(size=32, shard_samples=4, chunk_samples=2, seed=7)


def _build(src: Path | str, out: str, runner: str = "ray") -> None:
    """A build in this process: on the session's Ray, or the sequential runner's reference.

    Ray's start and a driver process are not what these tests are about (a killed build
    process and its resume are: ``tests/precompute/test_resume.py``).
    """
    build(str(src), out, SPEC, progress=False, runner=runner)


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_dataset(tmp_path_factory.mktemp("src"), NUM, size_range=(96, 256), seed=4)


@pytest.fixture(scope="module")
def local_store(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "store"
    _build(src, str(out), runner="sequential")  # byte for byte the Ray build's shard files
    return out


def _local_files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for name in FIELDS
        for p in sorted((out / name).rglob("*"))
        if p.is_file()
    }


def _s3_files(url: str) -> dict[str, bytes]:
    return {n: b for n, b in objects_under(url).items() if n.split("/", 1)[0] in FIELDS}


def test_build_into_s3_is_byte_identical_and_published_last(
    ray_local: None, any_bucket: str, src: Path, local_store: Path
) -> None:
    url = f"{any_bucket}/stores/train.zarr"
    _build(src, url)
    assert _s3_files(url) == _local_files(local_store)
    attrs = json.loads(location(f"{url}/zarr.json").read_bytes())["attributes"]["nostall"]
    assert attrs["complete"] and attrs["report"]["shards_built"] == NUM // 4
    assert (
        0 < attrs["report"]["bytes_written"] <= sum(m.size for m in location(url).list().values())
    )
    assert not location(f"{url}/{MARKER_DIR}/build.lock").exists()  # released
    assert verify_store(url) == []


def test_build_from_s3_into_s3_holds_the_samples_of_the_local_build(
    ray_local: None, any_bucket: str, src: Path, local_store: Path
) -> None:
    put_folder(src, f"{any_bucket}/raw")
    url = f"{any_bucket}/stores/from-s3.zarr"
    _build(f"{any_bucket}/raw", url)
    assert _s3_files(url) == _local_files(local_store)  # same slots, pixels, labels and keys
    attrs = json.loads(location(f"{url}/zarr.json").read_bytes())["attributes"]["nostall"]
    assert attrs["report"]["source"] == f"{any_bucket}/raw" and attrs["report"]["num_inputs"] == NUM
    assert verify_store(url) == []
