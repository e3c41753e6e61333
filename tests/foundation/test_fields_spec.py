"""Field kinds and specs: one registry decides, specs round-trip, bad options name the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from precompute.errors import DecodeError, SpecError
from precompute.fields import (
    KINDS,
    FieldSpec,
    Kind,
    Storage,
    check_fields,
    fields_table,
    kind_of,
    parse_fields_table,
    register_kind,
    v1_fields,
)

EVERY = [
    FieldSpec("image", "image"),
    FieldSpec("gray", "image", {"channels": 1, "fill": 7}),
    FieldSpec("mask", "mask", {"classes": 4}),
    FieldSpec("wide", "mask", {"classes": 300, "ignore_index": 65535}),
    FieldSpec("rgb", "mask", {"classes": 2, "colormap": [[0, 0, 0], [255, 0, 0]]}),
    FieldSpec("points", "keypoints", {"points": 4, "flip_pairs": [[0, 1], [2, 3]]}),
    FieldSpec("cube", "array", {"shape": [8, 8, 5], "dtype": "uint16"}),
    FieldSpec("label", "label", {"classes": 10}),
    FieldSpec("tags", "labels", {"classes": 6}),
    FieldSpec("position", "position", {"labels": "gt.mat", "patch": 9}),
]


def test_the_registry_holds_every_kind_and_each_declares_its_rules() -> None:
    assert set(KINDS) >= {
        "image",
        "mask",
        "keypoints",
        "array",
        "label",
        "labels",
        "audio",
        "position",
    }
    rules = {name: (k.resample, k.augment, k.photometric, k.spatial) for name, k in KINDS.items()}
    assert rules["image"] == ("bilinear", "bilinear", True, True)
    assert rules["mask"] == ("nearest", "nearest", False, True)
    assert rules["keypoints"] == ("affine", "affine", False, True)
    assert rules["array"] == rules["label"] == rules["labels"] == ("none", "none", False, False)
    assert rules["position"] == ("none", "none", False, False)
    assert (KINDS["mask"].mixup, KINDS["mask"].cutmix) == ("refuse", "paste")


@pytest.mark.parametrize("spec", EVERY, ids=lambda f: f.name)
def test_a_field_spec_round_trips_through_json(spec: FieldSpec) -> None:
    again = FieldSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and hash(again) == hash(spec)
    assert again.to_dict() == spec.to_dict()


def test_defaults_are_filled_in_and_storage_follows_the_options() -> None:
    mask = FieldSpec("mask", "mask", {"classes": 4})
    assert dict(mask.options) == {"classes": 4, "ignore_index": 255, "colormap": None}
    table = fields_table(EVERY, 32)
    assert table["image"]["shape"] == [32, 32, 3] and table["gray"]["shape"] == [32, 32, 1]
    assert (table["mask"]["dtype"], table["mask"]["fill"]) == ("uint8", 255)
    assert table["wide"]["dtype"] == "uint16"
    assert table["points"]["shape"] == [4, 3] and table["points"]["dtype"] == "float32"
    assert (table["cube"]["shape"], table["cube"]["dtype"]) == ([8, 8, 5], "uint16")
    assert (table["label"]["shape"], table["label"]["fill"]) == ([], -1)
    assert table["tags"]["shape"] == [6]
    assert {n for n, e in table.items() if e["extent"]} == {"image", "gray", "mask", "wide",
                                                            "rgb", "points"}  # fmt: skip
    assert parse_fields_table(json.loads(json.dumps(table)), 32) == tuple(EVERY)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "mask", "kind": "mask"}, "fields.mask.classes is required"),
        ({"name": "m", "kind": "mask", "options": {"classes": 0}}, "fields.m.classes must be"),
        (
            {"name": "m", "kind": "mask", "options": {"classes": 4, "ignore_index": 2}},
            "fields.m.ignore_index 2 is a class id",
        ),
        (
            {"name": "m", "kind": "mask", "options": {"classes": 3, "colormap": [[0, 0, 0]]}},
            "fields.m.colormap has 1 colours for 3 classes",
        ),
        (
            {"name": "m", "kind": "mask", "options": {"classes": 2, "bogus": 1}},
            "fields.m: unknown option(s) ['bogus']",
        ),
        (
            {"name": "p", "kind": "keypoints", "options": {"points": 2, "flip_pairs": [[0, 2]]}},
            "fields.p.flip_pairs names point 2",
        ),
        (
            {"name": "p", "kind": "keypoints", "options": {"flip_pairs": [[0, 1], [1, 2]]}},
            "fields.p.flip_pairs.1 [1, 2] repeats a point index",
        ),
        (
            {"name": "a", "kind": "array", "options": {"shape": [2], "dtype": "complex64"}},
            "fields.a.dtype must be one of",
        ),
        ({"name": "x", "kind": "volume"}, "fields.x.kind must be one of"),
        ({"name": "Image", "kind": "image"}, "a field name must match"),
        ({"name": "key", "kind": "image"}, "field name 'key' is reserved"),
        ({"name": "i", "kind": "image", "extra": 1}, "fields.i: unknown key(s) ['extra']"),
        ([1, 2], "a field must be a mapping"),
    ],
)
def test_bad_specs_name_the_field_and_the_value(data: object, message: str) -> None:
    with pytest.raises(SpecError, match=None) as info:
        FieldSpec.from_dict(data)
    assert message in str(info.value)


def test_a_field_list_is_checked_together() -> None:
    with pytest.raises(SpecError, match=r"\['a'\] given twice"):
        check_fields([FieldSpec("a", "image"), FieldSpec("a", "label")])
    with pytest.raises(SpecError, match=r"spatial field\(s\) \['pts'\] need a field read from"):
        check_fields([FieldSpec("pts", "keypoints", {"points": 2})])
    with pytest.raises(SpecError, match="at least one field"):
        check_fields([])


def test_a_stored_table_that_disagrees_with_its_options_is_refused() -> None:
    table = fields_table(
        [FieldSpec("image", "image"), FieldSpec("mask", "mask", {"classes": 4})], 16
    )
    table["mask"]["dtype"] = "uint16"
    with pytest.raises(SpecError, match=r"fields\.mask\.dtype is 'uint16'; a mask field"):
        parse_fields_table(table, 16)


def test_v1_stores_read_as_image_and_label() -> None:
    image, label = v1_fields(5)
    assert (image.kind, image.options["channels"], label.kind, label.options["classes"]) == (
        "image",
        3,
        "label",
        5,
    )


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        (EVERY[0], np.zeros((4, 4), np.float32), "(H, W, 3) uint8 or uint16 pixels, got"),
        (EVERY[2], np.array([[0, 1], [4, 255]]), "mask values [4] are outside the classes 0..3"),
        (EVERY[2], np.zeros((2, 2, 3), np.uint8), "expected an (H, W) integer mask"),
        (EVERY[5], np.zeros((3, 3), np.float32), "3 keypoints, the field has 4"),
        (EVERY[5], [[0, 0, 5]] * 4, "visibility must be 0, 1 or 2"),
        (EVERY[6], np.zeros((8, 8, 5), np.float32), "dtype float32 does not fit the field's"),
        (EVERY[6], np.zeros((8, 8, 5), np.int8), "dtype int8 does not fit the field's uint16"),
        (EVERY[6], np.zeros((8, 8, 4), np.uint8), "expected shape [8, 8, 5], got [8, 8, 4]"),
        (EVERY[7], 10, "label 10 is outside the classes 0..9"),
        (EVERY[8], [1, 1], "labels [1, 1] repeat a class"),
        (EVERY[8], [6], "label 6 is outside the classes 0..5"),
    ],
)
def test_values_are_validated_with_the_file_and_field_named(
    spec: FieldSpec, value: object, message: str
) -> None:
    with pytest.raises(DecodeError) as info:
        spec.spec.validate(value, spec.name, spec.options, "cases/a.png")
    assert str(info.value).startswith(f"cases/a.png: field {spec.name!r} ({spec.kind}): ")
    assert message in str(info.value)


def test_good_values_come_back_in_their_storage_dtype() -> None:
    def ok(spec: FieldSpec, value: object) -> np.ndarray:
        return spec.spec.validate(value, spec.name, spec.options, "k")

    assert ok(EVERY[2], np.array([[0, 3], [255, 1]], np.int64)).dtype == np.uint8
    assert ok(EVERY[8], [0, 5]).tolist() == [1, 0, 0, 0, 0, 1]
    assert ok(EVERY[7], np.int32(3)).dtype == np.int64
    assert ok(EVERY[6], np.ones((8, 8, 5), ">u2")).dtype == np.uint16  # byte order aside
    assert ok(EVERY[6], np.ones((8, 8, 5), np.uint8)).dtype == np.uint16  # a wider integer
    assert ok(EVERY[1], np.zeros((3, 2), np.uint8)).shape == (3, 2, 1)


def test_inline_cells_parse_by_kind() -> None:
    points = kind_of("keypoints").parse_inline("[[1, 2], [3.5, 4, 0]]")
    assert points == ((1.0, 2.0, 1.0), (3.5, 4.0, 0.0))
    assert (
        kind_of("label").parse_inline(" 7 ") == 7 and kind_of("label").parse_inline("cat") == "cat"
    )
    assert kind_of("labels").parse_inline('[1, "dog"]') == (1, "dog")
    for kind, cell, message in [
        ("keypoints", "[[1]]", "a keypoint must be [x, y] or [x, y, v]"),
        ("keypoints", "[[1, NaN]]", "must be a finite number"),
        ("keypoints", "[[1, 2, 3]]", "visibility must be 0, 1 or 2"),
        ("keypoints", "{", "keypoints is not JSON"),
        ("label", "", "empty label"),
        ("labels", "3", "labels must be a JSON list"),
        ("image", "a.png", "read from a file"),
    ]:
        with pytest.raises(ValueError, match=None) as info:
            kind_of(kind).parse_inline(cell)
        assert message in str(info.value)


def test_a_new_kind_registers_once() -> None:
    class Audio(Kind):
        name = "audio_test"
        source = "file"

        def storage(self, opts, size):
            return Storage((16000,), "int16", 0)

        def check(self, value, opts):
            return np.asarray(value, np.int16)

    register_kind(Audio())
    try:
        with pytest.raises(SpecError, match="registered already"):
            register_kind(Audio())
        assert kind_of("audio_test").resample == "none"
    finally:
        from precompute.fields import kinds

        del kinds._KINDS["audio_test"]
