"""put_folder against moto's real S3 server on 127.0.0.1: every file, chosen files last."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.errors import StoreError
from precompute.storage.location import location
from precompute.storage.objupload import put_folder
from tests.s3wire import WIRE, WireRequest


def _tree(root: Path) -> dict[str, bytes]:
    files = {"zarr.json": b"{}", "a/zarr.json": b"[1]", "a/c/0": b"x" * 100, "b.bin": b"\x00\xff"}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_every_file_is_put_and_the_named_ones_last(bucket: str, tmp_path: Path) -> None:
    files = _tree(tmp_path / "store")
    order: list[str] = []  # the PUTs in the order the server received them

    def recording_put(req: WireRequest) -> None:
        if req.op == "PutObject":
            order.append(f"s3://{req.bucket}/{req.key}")

    url = f"{bucket}/s.zarr"
    with WIRE.hook(recording_put):
        put = put_folder(tmp_path / "store", url + "/", last=["zarr.json", "missing"])
    assert put == len(files)
    assert order[-1] == f"{url}/zarr.json" and len(order) == len(files)
    assert order[:-1] == sorted(order[:-1])
    for name, data in files.items():
        assert location(f"{url}/{name}").read_bytes() == data


def test_a_missing_folder_is_refused_by_name(bucket: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"nope: not a folder, nothing to upload to s3://"):
        put_folder(tmp_path / "nope", f"{bucket}/x")
