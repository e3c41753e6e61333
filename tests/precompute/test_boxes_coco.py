"""The COCO reader: real annotation files over real images, every rule and every bad entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from precompute.errors import SourceError
from precompute.fields import FieldSpec
from precompute.kinds.boxes.coco import coco_fields, list_coco
from tests.precompute.boxdata import CATEGORIES, make_coco

IMAGE = FieldSpec("image", "image", {})


def _fields(**opts: object) -> tuple[FieldSpec, FieldSpec]:
    return IMAGE, FieldSpec("boxes", "boxes", {"classes": 3, **opts})


def _rewrite(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_boxes_become_corners_and_category_ids_become_sorted_class_indices(
    tmp_path: Path,
) -> None:
    path, doc = make_coco(tmp_path, n=4, per_image=2, empty=1)
    doc["categories"] = list(reversed(CATEGORIES))  # the file's order does not matter
    source = list_coco(_rewrite(path, doc), _fields())
    assert source.root == str(tmp_path) and source.fields == ("image", "boxes")
    keys = [item.key for item in source.items]
    assert keys == ["images/000.png", "images/001.jpg", "images/002.png", "images/003.jpg"]
    assert dict(source.classes) == {"boxes": ("cat", "dog", "eel")}  # ids 3, 7, 11
    first = doc["annotations"][0]
    x, y, w, h = first["bbox"]
    cls = [c["id"] for c in CATEGORIES].index(first["category_id"])
    assert source.items[0].value("boxes")[0] == (x, y, x + w, y + h, cls)
    assert len(source.items[0].value("boxes")) == 2
    assert source.items[3].value("boxes") == ()  # an image without annotations is kept


def test_crowd_annotations_are_left_out(tmp_path: Path) -> None:
    path, doc = make_coco(tmp_path, n=2, per_image=2)
    doc["annotations"][0]["iscrowd"] = 1
    source = list_coco(_rewrite(path, doc), _fields())
    assert len(source.items[0].value("boxes")) == 1
    x, y, w, h = doc["annotations"][1]["bbox"]
    assert source.items[0].value("boxes")[0][:4] == (x, y, x + w, y + h)


def test_images_dir_is_where_the_file_names_are(tmp_path: Path) -> None:
    pics = tmp_path / "elsewhere" / "pics"
    path, _ = make_coco(tmp_path / "ann", n=3, images=pics)
    source = list_coco(path, _fields(images=str(pics)))
    assert source.root == str(pics) and source.items[0].key == "000.png"
    assert Path(source.locate(source.items[0].key)).is_file()


def test_inferred_fields_take_the_category_count_and_the_flags(tmp_path: Path) -> None:
    path, _ = make_coco(tmp_path, n=2)
    image, boxes = coco_fields(str(path), {"boxes": {"max_boxes": 5}}, fill=7)
    assert image.options["fill"] == 7 and boxes.kind == "boxes"
    assert boxes.options["classes"] == 3 and boxes.options["max_boxes"] == 5


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["annotations"][1]["bbox"].__setitem__(2, 0), "annotation id 1001: bbox"),
        (lambda d: d["annotations"][1].__setitem__("bbox", [1, 2, "3", 4]), "annotation id 1001"),
        (lambda d: d["annotations"][1].__setitem__("category_id", 5), "category_id 5 is not"),
        (lambda d: d["annotations"][1].__setitem__("image_id", 9), "annotation id 1001: image_id"),
        (
            lambda d: d["images"][1].__setitem__("file_name", d["images"][0]["file_name"]),
            "given twice",
        ),
        (  # one file, written another way: its boxes would land on the other image's pixels
            lambda d: d["images"][1].__setitem__("file_name", "./" + d["images"][0]["file_name"]),
            r"image id 101: id or file_name given twice \(id 100\)",
        ),
        (lambda d: d["images"][1].pop("file_name"), "image id 101 has no usable 'file_name'"),
        (
            lambda d: d["annotations"][1].__setitem__("iscrowd", "1"),  # text: crowd or not?
            'annotation id 1001: iscrowd must be 0 or 1, got "1"',
        ),
    ],
)
def test_a_bad_entry_names_the_file_and_the_entry(tmp_path: Path, edit, message: str) -> None:
    path, doc = make_coco(tmp_path, n=3)
    edit(doc)
    _rewrite(path, doc)
    with pytest.raises(SourceError, match=message) as err:
        list_coco(path, _fields())
    assert str(path) in str(err.value)


def test_under_skip_an_image_with_a_bad_box_is_left_out_and_recorded(tmp_path: Path) -> None:
    path, doc = make_coco(tmp_path, n=3, per_image=2)
    doc["annotations"][3]["bbox"][3] = -1  # the second box of image 101
    source = list_coco(_rewrite(path, doc), _fields(), on_error="skip")
    assert [item.key for item in source.items] == ["images/000.png", "images/002.png"]
    bbox = json.dumps(doc["annotations"][3]["bbox"])
    why = f"annotation id 1003: bbox {bbox} has no area (w and h must be > 0)"
    assert source.skipped == (("images/001.jpg", why),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"images": []}', "needs an object with 'images' and 'annotations' lists"),
        ('{"images": [], "annotations": []}', "non-empty 'categories'"),
        (
            '{"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}]}',
            "lists no usable image",
        ),
        (
            '{"images": [], "annotations": [], "categories": [{"id": 1}, {"id": 1, "name": "a"}]}',
            r"categories\[0\] must be",
        ),
    ],
)
def test_a_file_that_is_no_coco_file_is_refused_whatever_the_policy(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "instances.json"
    path.write_text(text)
    with pytest.raises(SourceError, match=message):
        list_coco(path, _fields(), on_error="skip")


def test_a_file_name_whose_symlink_leaves_the_folder_is_recorded(tmp_path: Path) -> None:
    path, _ = make_coco(tmp_path / "set", n=2)
    outside = tmp_path / "outside.png"
    outside.write_bytes((tmp_path / "set" / "images" / "000.png").read_bytes())
    (tmp_path / "set" / "images" / "000.png").unlink()
    (tmp_path / "set" / "images" / "000.png").symlink_to(outside)
    source = list_coco(path, _fields())
    assert [item.key for item in source.items] == ["images/001.jpg"]
    assert source.skipped == (("images/000.png", "symlink leaves the source root; not followed"),)
