"""An output that overlaps the source is refused before anything is written (issue 11, item 5)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from precompute import BuildSpec, StoreError, build
from precompute.cli import main


@pytest.fixture()
def src(small_dataset: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(small_dataset, tmp_path / "images"))


def _snapshot(root: Path) -> list[tuple[str, int]]:
    return sorted((p.relative_to(root).as_posix(), p.lstat().st_size) for p in root.rglob("*"))


def _refused(src: str, out: str, watch: Path, match: str) -> None:
    before = _snapshot(watch)
    with pytest.raises(StoreError, match=match):
        build(src, out, BuildSpec(size=16), progress=False)
    assert _snapshot(watch) == before  # no _nostall/, no lock, no new file


@pytest.mark.parametrize("sub", [".", "sub", "circles/deeper", "sub/../sub2"])
def test_output_inside_the_source_is_refused(src: Path, sub: str) -> None:
    out = os.path.join(str(src), sub)
    _refused(str(src), out, src, "lies inside the source")
    assert not (src / "_nostall").exists()


def test_output_inside_the_source_through_a_symlink_is_refused(src: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(src)
    _refused(str(src), str(tmp_path / "alias"), src, "lies inside the source")
    _refused(str(src), str(tmp_path / "alias" / "sub"), src, "lies inside the source")
    _refused(str(tmp_path / "alias"), str(src / "sub"), src, "lies inside the source")


def test_source_inside_the_output_is_refused(src: Path, tmp_path: Path) -> None:
    _refused(str(src), str(tmp_path), tmp_path, "holds the source")
    assert not (tmp_path / "_nostall").exists()
    manifest = src / "list.csv"
    manifest.write_text("circles/0000.png,0\n")
    _refused(str(manifest), str(src), src, "holds the source")


def test_output_beside_a_manifest_is_allowed(src: Path, tmp_path: Path) -> None:
    from precompute.pipeline.outputs import check_output

    check_output(str(src / "store"), str(src / "list.csv"))  # the manifest file is the source
    check_output(str(tmp_path / "store"), str(src))  # siblings
    check_output(str(tmp_path / "imagesX"), str(src))  # a shared name prefix is not nesting


def test_cli_refuses_overlap_in_one_line(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _snapshot(src)
    with pytest.raises(SystemExit) as info:
        main(["build", str(src), "--out", str(src / "store")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "lies inside the source" in err
    assert len(err.strip().splitlines()) == 1 and str(src / "store") in err
    assert _snapshot(src) == before


@pytest.mark.parametrize(
    ("out", "src", "needle"),
    [
        ("s3://b/raw/store.zarr", "s3://b/raw", "lies inside the source"),
        ("s3://b/raw/", "s3://b/raw", "lies inside the source"),
        ("s3://b/stores", "s3://b/stores/raw", "holds the source"),
    ],
)
def test_object_store_prefixes_that_overlap_are_refused(out: str, src: str, needle: str) -> None:
    from precompute.pipeline.outputs import check_output

    with pytest.raises(StoreError, match=needle):
        check_output(out, src)


def test_object_store_prefixes_apart_and_a_manifest_beside_are_allowed() -> None:
    from precompute.pipeline.outputs import check_output

    check_output("s3://b/stores/train.zarr", "s3://b/raw")
    check_output("s3://b/raw/train.zarr", "s3://b/raw/train.csv")
    check_output("s3://b/rawer", "s3://b/raw")  # a prefix of the name is not a parent
