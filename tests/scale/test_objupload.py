"""put_folder against moto's real S3 server on 127.0.0.1: every file, chosen files last."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.errors import StoreError
from precompute.storage import objstore
from precompute.storage.objupload import put_folder


def _tree(root: Path) -> dict[str, bytes]:
    files = {"zarr.json": b"{}", "a/zarr.json": b"[1]", "a/c/0": b"x" * 100, "b.bin": b"\x00\xff"}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_every_file_is_put_and_the_named_ones_last(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _tree(tmp_path / "store")
    order: list[str] = []
    real_put = objstore.put_bytes

    def recording_put(url: str, data: bytes, **kwargs: bool) -> None:
        order.append(url)
        real_put(url, data, **kwargs)  # the real PUT to the server

    monkeypatch.setattr(objstore, "put_bytes", recording_put)
    url = f"{bucket}/s.zarr"
    assert put_folder(tmp_path / "store", url + "/", last=["zarr.json", "missing"]) == len(files)
    assert order[-1] == f"{url}/zarr.json" and len(order) == len(files)
    assert order[:-1] == sorted(order[:-1])
    for name, data in files.items():
        assert objstore.get_range(f"{url}/{name}").data == data


def test_a_missing_folder_is_refused_by_name(bucket: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"nope: not a folder, nothing to upload to s3://"):
        put_folder(tmp_path / "nope", f"{bucket}/x")
