"""Folders and manifests of array files listed as fields image (array) + label, real files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import tifffile

from precompute.arrays.readers import read_array
from precompute.arrays.sources import list_arrays
from precompute.errors import SourceError
from precompute.sources.classes import list_source
from precompute.sources.folders import ESCAPES

CUBE = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)


def _tree(root: Path) -> Path:
    (root / "corn" / "sub").mkdir(parents=True)
    (root / "grass").mkdir()
    np.save(root / "corn" / "a.npy", CUBE)
    np.savez(root / "corn" / "sub" / "b.npz", cube=CUBE + 1)
    tifffile.imwrite(
        root / "grass" / "c.tif", np.moveaxis(CUBE + 2, 2, 0), photometric="minisblack"
    )
    scipy.io.savemat(root / "grass" / "d.MAT", {"x": CUBE + 3})
    (root / "grass" / "notes.txt").write_text("ignored")
    (root / "grass" / ".hidden.npy").write_bytes(b"ignored")
    return root


def test_class_folders_of_array_files_list_as_image_and_label(tmp_path: Path) -> None:
    src = list_arrays(_tree(tmp_path / "src"))
    assert src.fields == ("image", "label") and src.classes == (("label", ("corn", "grass")),)
    assert [(i.key, i.value("label")) for i in src.items] == [
        ("corn/a.npy", 0), ("corn/sub/b.npz", 0), ("grass/c.tif", 1), ("grass/d.MAT", 1)
    ]  # fmt: skip
    for n, item in enumerate(src.items):
        data = src.read_bytes(item, "image")
        assert np.array_equal(read_array(data, item.key, item.file("image")), CUBE + n)
    assert src.skipped == ()


def test_the_v1_lister_finds_no_images_where_the_array_lister_finds_cubes(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    np.save(tmp_path / "c" / "x.npy", CUBE)
    with pytest.raises(SourceError, match=r"no image files \(\.avif, \.bmp, .*\) found"):
        list_source(tmp_path)
    assert [i.key for i in list_arrays(tmp_path).items] == ["c/x.npy"]


def test_escaping_symlinks_and_fifos_are_recorded_not_listed(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    outside = tmp_path / "outside"
    outside.mkdir()
    np.save(outside / "o.npy", CUBE)
    os.symlink(outside / "o.npy", src / "corn" / "link.npy")
    os.symlink(outside, src / "escaped_class")
    os.mkfifo(src / "grass" / "pipe.npy")
    got = list_arrays(src)
    assert "corn/link.npy" not in [i.key for i in got.items]
    assert got.skipped == (
        ("corn/link.npy", ESCAPES),
        ("escaped_class", ESCAPES),
        ("grass/pipe.npy", "not a regular file (a FIFO)"),
    )


def test_a_manifest_of_array_paths_lists_them_and_refuses_other_files(tmp_path: Path) -> None:
    _tree(tmp_path)
    good = tmp_path / "m.csv"
    good.write_text("path,label\ncorn/a.npy,1\ngrass/c.tif,0\n")
    src = list_arrays(good)
    assert [(i.file("image"), i.value("label")) for i in src.items] == [
        ("corn/a.npy", 1), ("grass/c.tif", 0)
    ]  # fmt: skip
    assert src.classes == () and src.root == str(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"path": "corn/a.npy", "label": "corn"}\n{"path": "x.png", "label": "grass"}\n')
    with pytest.raises(SourceError, match=r"bad\.jsonl: line 2: 'x\.png' is not an array file"):
        list_arrays(bad)
    skipped = list_arrays(bad, on_error="skip")
    assert [i.key for i in skipped.items] == ["corn/a.npy"]
    assert skipped.skipped[0][0] == "x.png" and skipped.classes == (("label", ("corn", "grass")),)


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        (lambda p: None, r"source folder does not exist"),
        (lambda p: p.mkdir(), r"no class sub-folders"),
        (lambda p: (p / "c").mkdir(parents=True), r"no array files \(\.npy, \.npz, \.tif"),
    ],
)
def test_a_folder_without_arrays_is_refused_clearly(
    tmp_path: Path, setup: object, why: str
) -> None:
    path = tmp_path / "src"
    setup(path)  # type: ignore[operator]
    with pytest.raises(SourceError, match=rf"src: {why}"):
        list_arrays(path)


@pytest.mark.parametrize(
    ("first", "other", "message"),
    [
        (
            "a.tif",
            "b.npy",
            r"mixes image files \(1, e\.g\. c/a\.tif\) and array files \(1, "
            r"e\.g\. c/b\.npy\): keep one kind per source folder; a folder whose first file is a "
            r"\.tif is read as images",
        ),
        (
            "a.npy",
            "b.png",
            r"mixes array files \(1, e\.g\. c/a\.npy\) and image files \(1, e\.g\. c/b\.png\)",
        ),
        ("a.npy", "b.wav", r"mixes array files .* and audio files \(1, e\.g\. c/b\.wav"),
    ],
)
def test_a_folder_mixing_arrays_with_images_or_audio_is_refused_never_halved(
    tmp_path: Path, first: str, other: str, message: str
) -> None:
    """The kind of the first file decides the lister; the other kind was dropped unsaid."""
    from precompute.sources.resolve import list_build_source
    from precompute.spec import BuildSpec

    (tmp_path / "c").mkdir()
    for name in (first, other):
        path = tmp_path / "c" / name
        if name.endswith(".npy"):
            np.save(path, CUBE)
        elif name.endswith(".tif"):
            tifffile.imwrite(path, CUBE.astype(np.uint8), photometric="rgb")
        else:
            path.write_bytes(b"\x00" * 64)
    with pytest.raises(SourceError, match=message):
        list_build_source(str(tmp_path), BuildSpec(size=4))
