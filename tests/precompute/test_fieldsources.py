"""Sources with named fields: segmentation folders and manifests of field columns, real files."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute.errors import SourceError
from precompute.fields import FieldSpec
from precompute.fields.masks import decode_mask
from precompute.sources.fields import list_field_manifest, list_segmentation
from precompute.sources.folders import ESCAPES
from precompute.stages.decode import decode_bytes

MASK = FieldSpec("mask", "mask", {"classes": 4})
IMAGE = FieldSpec("image", "image")
POINTS = FieldSpec("keypoints", "keypoints")
LABEL = FieldSpec("label", "label")


def _write(path: Path, kind: str, size: tuple[int, int] = (12, 8), seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    if kind == "mask":
        img = Image.fromarray(rng.integers(0, 4, size[::-1], dtype=np.uint8), "P")
        img.putpalette(list(range(256)) * 3)
    else:
        img = Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8), "RGB")
    buf = io.BytesIO()
    img.save(buf, "JPEG" if path.suffix == ".jpg" else "PNG")
    path.write_bytes(buf.getvalue())


@pytest.fixture
def seg(tmp_path: Path) -> Path:
    for i, name in enumerate(["a.jpg", "b.png", "sub/c.png"]):
        _write(tmp_path / "images" / name, "image", seed=i)
        _write(tmp_path / "masks" / (os.path.splitext(name)[0] + ".png"), "mask", seed=i)
    return tmp_path


def test_images_and_masks_beside_another_folder_are_no_classes_but_named(
    seg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A VOC-style splits/ beside them: not a store of two classes "images" and "masks"."""
    from precompute.cli import main

    (seg / "splits").mkdir()
    (seg / "splits" / "train.txt").write_text("a\n")
    said = (
        f"{seg}: holds images/ and masks/ beside splits/: a segmentation folder's only "
        "sub-folders are images/ and masks/; move the others out"
    )
    for flags in ([], ["--mask-classes", "4"]):
        out = ["--out", str(seg.parent / "s"), "--size", "8", "--runner", "sequential"]
        with pytest.raises(SystemExit) as exited:
            main(["build", str(seg), *out, *flags])
        assert exited.value.code == 2 and said in capsys.readouterr().err
    assert not (seg.parent / "s").exists()
    (seg / "splits" / "train.txt").unlink()
    (seg / "splits").rmdir()
    assert len(list_segmentation(seg)) == 3


def test_a_segmentation_folder_pairs_images_and_masks_by_name(seg: Path) -> None:
    src = list_segmentation(seg)
    assert src.fields == ("image", "mask") and len(src) == 3 and src.skipped == ()
    assert [(i.key, i.file("mask")) for i in src.items] == [
        ("images/a.jpg", "masks/a.png"),
        ("images/b.png", "masks/b.png"),
        ("images/sub/c.png", "masks/sub/c.png"),
    ]
    item = src.items[2]
    assert decode_bytes(src.read_bytes(item, "image"), item.key, 10**6).size == (12, 8)
    mask = decode_mask(src.read_bytes(item, "mask"), item.file("mask"), MASK, 10**6)
    assert mask.shape == (8, 12) and set(np.unique(mask)) <= {0, 1, 2, 3}


def test_a_file_without_its_pair_is_a_per_input_error(seg: Path) -> None:
    _write(seg / "images" / "d.png", "image")
    _write(seg / "masks" / "e.png", "mask")
    with pytest.raises(SourceError, match=r"images/d\.png: no mask masks/d\.\*"):
        list_segmentation(seg)
    src = list_segmentation(seg, on_error="skip")
    assert len(src) == 3
    assert src.skipped == (
        ("images/d.png", "no mask masks/d.*"),
        ("masks/e.png", "no image images/e.*"),
    )


def test_links_out_of_a_segmentation_folder_are_counted_and_said(tmp_path: Path) -> None:
    """Every file a symlink out of the source: N left out and why, not 'no image has its mask'."""
    real, seg = tmp_path / "real", tmp_path / "seg"
    for i in range(3):
        for folder, kind in (("images", "image"), ("masks", "mask")):
            _write(real / folder / f"{i}.png", kind, seed=i)
            (seg / folder).mkdir(parents=True, exist_ok=True)
            os.symlink(real / folder / f"{i}.png", seg / folder / f"{i}.png")
    for policy in ("raise", "skip"):
        with pytest.raises(SourceError) as info:
            list_segmentation(seg, on_error=policy)
        assert str(info.value) == (
            f"{seg}: no image has its mask (images/<name>.* + masks/<name>.*): 6 entries were "
            f"left out while listing (e.g. images/0.png: {ESCAPES})"
        )


def test_the_pair_of_a_link_out_is_left_out_with_it_under_either_policy(seg: Path) -> None:
    """A mask that links out of the source: its image is left out naming why, not 'no mask'."""
    _write(seg.parent / "elsewhere" / "d.png", "mask")
    _write(seg / "images" / "d.png", "image")
    os.symlink(seg.parent / "elsewhere" / "d.png", seg / "masks" / "d.png")
    for policy in ("raise", "skip"):
        src = list_segmentation(seg, on_error=policy)
        assert len(src) == 3
        assert src.skipped == (
            ("images/d.png", f"its mask masks/d.png was left out: {ESCAPES}"),
            ("masks/d.png", ESCAPES),
        )


def test_two_files_of_one_name_are_refused(seg: Path) -> None:
    _write(seg / "images" / "a.png", "image")
    with pytest.raises(SourceError, match=r"images/a\.png: another file has the same name 'a'"):
        list_segmentation(seg)
    assert [k for k, _ in list_segmentation(seg, on_error="skip").skipped] == ["images/a.png"]


def test_a_folder_without_masks_or_pairs_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "images" / "a.png", "image")
    with pytest.raises(
        SourceError, match=r"needs the folders images/ and masks/ \(missing: masks/\)"
    ):
        list_segmentation(tmp_path)
    (tmp_path / "masks").mkdir()
    with pytest.raises(SourceError, match="no image has its mask"):
        list_segmentation(tmp_path, on_error="skip")


def test_a_symlink_leaving_the_folder_is_recorded(seg: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "x.png"
    _write(outside, "image")
    (seg / "images" / "x.png").symlink_to(outside)
    src = list_segmentation(seg)
    assert ("images/x.png", ESCAPES) in src.skipped and len(src) == 3


# -- manifests -------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for i in range(3):
        _write(tmp_path / "img" / f"{i}.jpg", "image", seed=i)
        _write(tmp_path / "seg" / f"{i}.png", "mask", seed=i)
    return tmp_path


def test_a_csv_manifest_has_a_column_per_field(files: Path) -> None:
    (files / "m.csv").write_text(
        "label,image,keypoints,mask\n"
        'cat,img/2.jpg,"[[1, 2], [3, 4, 0]]",seg/2.png\n'
        'dog,img\\0.jpg,"[[5.5, 6], [7, 8, 2]]",seg/0.png\n'
    )
    src = list_field_manifest(files / "m.csv", [IMAGE, MASK, POINTS, LABEL])
    assert src.fields == ("image", "mask", "keypoints", "label")
    assert src.root == str(files) and src.classes == (("label", ("cat", "dog")),)
    first, second = src.items
    assert (first.key, first.file("mask"), first.value("label")) == ("img/0.jpg", "seg/0.png", 1)
    assert first.value("keypoints") == ((5.5, 6.0, 1.0), (7.0, 8.0, 2.0))
    assert second.value("keypoints") == ((1.0, 2.0, 1.0), (3.0, 4.0, 0.0))
    assert src.locate(second.file("image")) == str(files / "img" / "2.jpg")
    assert decode_bytes(src.read_bytes(second, "image"), second.key, 10**6).size == (12, 8)


def test_a_jsonl_manifest_with_integer_labels_and_tags(files: Path) -> None:
    lines = [
        {"image": "img/0.jpg", "label": 3, "tags": [0, 2]},
        {"image": "img/1.jpg", "label": "4", "tags": "[1]"},
    ]
    (files / "m.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    tags = FieldSpec("tags", "labels", {"classes": 3})
    src = list_field_manifest(files / "m.jsonl", [IMAGE, LABEL, tags])
    assert src.classes == ()
    assert [(i.value("label"), i.value("tags")) for i in src.items] == [(3, (0, 2)), (4, (1,))]


def test_keypoint_counts_must_agree_between_samples(files: Path) -> None:
    (files / "m.jsonl").write_text(
        '{"image": "img/0.jpg", "keypoints": [[1, 2], [3, 4]]}\n'
        '{"image": "img/1.jpg", "keypoints": [[1, 2]]}\n'
    )
    with pytest.raises(
        SourceError, match=r"line 2: 1 keypoints in 'keypoints'; every sample needs 2"
    ):
        list_field_manifest(files / "m.jsonl", [IMAGE, POINTS])
    three = FieldSpec("keypoints", "keypoints", {"points": 3})
    with pytest.raises(
        SourceError, match=r"line 1: 2 keypoints in 'keypoints'; every sample needs 3"
    ):
        list_field_manifest(files / "m.jsonl", [IMAGE, three])


def test_a_bad_cell_is_a_per_line_error(files: Path) -> None:
    (files / "m.csv").write_text(
        'image,keypoints\nimg/0.jpg,"[[1, 2]]"\nimg/1.jpg,"[[1]]"\nimg/2.jpg,\n'
    )
    with pytest.raises(SourceError, match=r"m\.csv: img/1\.jpg: line 3: a keypoint must be"):
        list_field_manifest(files / "m.csv", [IMAGE, POINTS])
    src = list_field_manifest(files / "m.csv", [IMAGE, POINTS], on_error="skip")
    assert [i.key for i in src.items] == ["img/0.jpg"]
    assert src.skipped == (
        ("img/1.jpg", "line 3: a keypoint must be [x, y] or [x, y, v], got [1]"),
        ("img/2.jpg", "line 4: no keypoints"),
    )


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("image,label\nimg/0.jpg,1\n", [IMAGE, MASK], "missing ['mask']"),
        ("image\nimg/0.jpg\nimg/0.jpg\n", [IMAGE], "line 3: duplicate path 'img/0.jpg'"),
        (
            "image\nimg/0.jpg\n./img/0.jpg\n",
            [IMAGE],
            "line 3: duplicate path './img/0.jpg': line 2",
        ),
        (
            "image,label\nimg/0.jpg,1\nimg/1.jpg,cat\n",
            [IMAGE, LABEL],
            "line 3: label 'cat' and line 2's 1 mix integers and class names",
        ),
        ("label\n1\n", [LABEL], "needs at least one file field"),
        ("image\n", [IMAGE], "manifest lists no usable samples"),
    ],
)
def test_malformed_manifests_are_refused(files: Path, text: str, fields, message: str) -> None:
    (files / "m.csv").write_text(text)
    with pytest.raises(SourceError) as info:
        list_field_manifest(files / "m.csv", fields)
    assert message in str(info.value)


def test_a_manifest_path_leaving_its_folder_by_symlink_is_recorded(files, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("far") / "x.jpg"
    _write(outside, "image")
    (files / "img" / "x.jpg").symlink_to(outside)
    (files / "m.csv").write_text("image\nimg/x.jpg\nimg/0.jpg\n")
    src = list_field_manifest(files / "m.csv", [IMAGE])
    assert [i.key for i in src.items] == ["img/0.jpg"] and src.skipped == (("img/x.jpg", ESCAPES),)


def test_a_manifest_behind_a_url_resolves_paths_against_its_folder(files: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/fields-test/img/0.jpg", (files / "img" / "0.jpg").read_bytes())
    fs.pipe("/fields-test/m.csv", b'image,keypoints\nimg/0.jpg,"[[1, 2]]"\n')
    try:
        src = list_field_manifest("memory://fields-test/m.csv", [IMAGE, POINTS])
        item = src.items[0]
        assert src.root == "memory://fields-test"
        assert src.locate(item.key) == "memory://fields-test/img/0.jpg"
        assert decode_bytes(src.read_bytes(item, "image"), item.key, 10**6).size == (12, 8)
        with pytest.raises(SourceError, match="a segmentation folder must be a local folder"):
            list_segmentation("memory://fields-test")
    finally:
        fs.rm("/fields-test", recursive=True)


def test_a_file_url_is_a_local_path(seg: Path) -> None:
    assert list_segmentation(f"file://{seg}").items == list_segmentation(seg).items
