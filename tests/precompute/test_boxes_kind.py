"""The ``boxes`` kind: its options, manifest cells, checks, learned options and verify's check."""

from __future__ import annotations

import numpy as np
import pytest

from precompute.errors import DecodeError, SpecError
from precompute.fields import KINDS, FieldSpec
from precompute.kinds import hooks

OPTS = {"classes": 3, "max_boxes": 3}


def test_the_kind_and_every_rule_are_registered_by_the_kind_module() -> None:
    f = FieldSpec("boxes", "boxes", OPTS)
    assert KINDS["boxes"] is f.spec and (f.spatial, f.resample, f.augment) == (
        True,
        "boxes",
        "boxes",
    )
    assert hooks.loader_rule("boxes") is not None and hooks.rot90_rule("boxes") is not None
    assert hooks.mix_rule("mixup", "boxes") is hooks.mix_rule("cutmix", "boxes")
    assert "coco" in {r.name for r in hooks.source_readers()}
    st = f.storage(64)
    assert (st.shape, st.dtype, st.fill) == ((3, 5), "float32", -1.0)
    assert {k: (v.shape, v.dtype) for k, v in f.spec.companions(f.options, 64).items()} == {
        "count": ((), "int32")
    }
    assert dict(f.options) == {**OPTS, "min_visibility": 0.1, "images": None}


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"min_visibility": 1.5}, r"fields.boxes.min_visibility must be a number in \[0, 1\]"),
        ({"max_boxes": 0}, r"fields.boxes.max_boxes must be an integer in \[1, 65536\]"),
        ({"images": ""}, r"fields.boxes.images must be a folder path"),
        ({"points": 3}, r"unknown option\(s\) \['points'\] of kind 'boxes'"),
    ],
)
def test_bad_options_name_the_option_and_the_value(opts: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        FieldSpec("boxes", "boxes", opts)


def test_storage_needs_max_boxes_a_build_learns_it() -> None:
    f = FieldSpec("boxes", "boxes")
    with pytest.raises(SpecError, match="set option 'max_boxes'"):
        f.storage(8)
    learned = f.spec.learn(f.options, [((1, 2, 3, 4, 0), (1, 2, 3, 4, 4)), ()])
    assert learned == {"max_boxes": 2, "classes": 5}
    assert f.spec.learn(f.options, [(), ()]) == {"max_boxes": 1, "classes": 1}
    # past the options' limit, the error says what was learned from the source (it said
    # "fields.boxes.max_boxes must be an integer in [1, 65536], got 70003": an option never set)
    with pytest.raises(SpecError, match=r"^a sample of the source has 65,537 boxes; a store"):
        f.spec.learn(f.options, [[(1, 2, 3, 4, 0)] * 65_537])
    with pytest.raises(SpecError, match=r"^a box of the source has class 65,536; classes are 0"):
        f.spec.learn(f.options, [[(1, 2, 3, 4, 65_536)]])
    assert f.spec.learn(f.options, [[(1, 2, 3, 4, 65_535)]])["classes"] == 65_536


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("[[1, 2, 3]]", r"box 0 must be \[x0, y0, x1, y1, class\]"),
        ('[[1, 2, 3, "4", 0]]', "a box coordinate must be a finite number"),
        ("[[1, 2, 3, 4, 1.5]]", "a box class must be an integer >= 0"),
        ("[[1, 2, 3, 4, -1]]", "a box class must be an integer >= 0"),
        ("{}", r"boxes must be a list of \[x0, y0, x1, y1, class\]"),
        ("[[1, 2, 3, 4", "boxes are not JSON"),
    ],
)
def test_a_bad_manifest_cell_says_what_is_wrong(cell: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KINDS["boxes"].parse_inline(cell)


def test_a_cell_parses_to_rows_and_an_empty_list_is_no_box() -> None:
    kind = KINDS["boxes"]
    assert kind.parse_inline("[[1, 2.5, 3, 4, 2.0]]") == ((1.0, 2.5, 3.0, 4.0, 2),)
    assert kind.parse_inline([]) == ()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[0, 0, 1, 1, 0]] * 4, "4 boxes, more than max_boxes 3"),
        ([[0, 0, 1, 1, 3]], r"box 0 \[0.0, 0.0, 1.0, 1.0, 3.0\]: the class is not an index in"),
        ([[0, 0, 1, 1, 0], [2, 0, 2, 1, 0]], r"box 1 .*: x0 >= x1 \(no width\)"),
        ([[0, 5, 1, 1, 0]], r"box 0 .*: y0 >= y1 \(no height\)"),
    ],
)
def test_the_build_check_names_the_input_the_field_and_the_box(rows: list, message: str) -> None:
    f = FieldSpec("boxes", "boxes", OPTS)
    with pytest.raises(DecodeError, match=rf"^img/7.png: field 'boxes' \(boxes\): {message}"):
        f.spec.validate(rows, f.name, f.options, "img/7.png")


def test_check_pads_to_max_boxes_in_float64_for_one_rounding_by_the_placement() -> None:
    f = FieldSpec("boxes", "boxes", OPTS)
    out = f.spec.check([[0.1, 0, 1, 1, 2]], f.options)
    assert out.dtype == np.float64 and out.tolist() == [[0.1, 0, 1, 1, 2], [-1] * 5, [-1] * 5]
    assert int(f.spec.moved_companions(out, f.options)["count"]) == 1


def test_verify_refuses_rows_after_padding_and_bad_stored_boxes() -> None:
    f = FieldSpec("boxes", "boxes", OPTS)
    good = np.asarray([[[0, 0, 2, 2, 1], [-1] * 5, [-1] * 5]], dtype=np.float32)
    f.spec.check_stored(good, f.options)
    gap = good.copy()
    gap[0, 2] = [0, 0, 2, 2, 1]
    with pytest.raises(ValueError, match="sample 0: a box after a padding row"):
        f.spec.check_stored(gap, f.options)
    flat = good.copy()
    flat[0, 0, 2] = 0
    with pytest.raises(ValueError, match=r"box 0 .*: x0 >= x1"):
        f.spec.check_stored(flat, f.options)
