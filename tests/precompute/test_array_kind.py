"""The array kind's ``spatial`` option: rules, storage, checks, and the build rule it names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from precompute.arrays.readers import decode_array
from precompute.arrays.resample import place_array
from precompute.errors import DecodeError, SpecError
from precompute.fields import FieldSpec
from precompute.fields.geometry import PLACE, placement
from precompute.fields.spec import fields_table, parse_fields_table

CUBE = FieldSpec("cube", "array", {"shape": [12, 10, 5], "dtype": "uint16", "spatial": True})
PLAIN = FieldSpec("extra", "array", {"shape": [2, 3], "dtype": "float32"})


def test_a_plain_array_keeps_its_rules_and_storage() -> None:
    assert (PLAIN.spatial, PLAIN.resample, PLAIN.augment) == (False, "none", "none")
    assert PLAIN.options["spatial"] is False
    st = PLAIN.storage(64)
    assert (st.shape, st.dtype, st.fill) == ((2, 3), "float32", 0)


def test_a_spatial_array_is_placed_and_cropped_by_the_array_rules() -> None:
    assert (CUBE.spatial, CUBE.resample, CUBE.augment) == (True, "array", "array")
    st = CUBE.storage(8)
    assert (st.shape, st.dtype, st.fill) == ((8, 8, 5), "uint16", 0)


def test_a_spatial_array_round_trips_through_the_fields_table() -> None:
    image = FieldSpec("image", "image")
    table = json.loads(json.dumps(fields_table([image, CUBE], 8)))
    assert table["cube"]["shape"] == [8, 8, 5] and table["cube"]["extent"] == "extent"
    assert parse_fields_table(table, 8) == (image, CUBE)


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (
            {"shape": [12, 10], "dtype": "uint16", "spatial": True},
            r"shape is \[12, 10\]; a spatial",
        ),
        ({"shape": [2], "dtype": "uint16", "spatial": 1}, r"spatial must be true or false, got 1"),
    ],
)
def test_bad_spatial_options_are_refused(options: dict[str, object], why: str) -> None:
    with pytest.raises(SpecError, match=rf"fields\.cube\.{why}"):
        FieldSpec("cube", "array", options)


def test_a_wrong_band_count_is_a_per_input_error_naming_the_file() -> None:
    value = np.zeros((12, 10, 4), np.uint16)
    with pytest.raises(
        DecodeError,
        match=r"^c/x\.npy: field 'cube' \(array\): expected shape \[12, 10, 5\], got \[12, 10, 4\]",
    ):
        CUBE.spec.validate(value, "cube", CUBE.options, "c/x.npy")


def test_place_array_fits_the_place_table_signature() -> None:
    rules = {**PLACE, "array": place_array}  # what the integration adds to PLACE
    value = np.arange(12 * 10 * 5, dtype=np.uint16).reshape(12, 10, 5)
    checked = CUBE.spec.validate(value, "cube", CUBE.options, "x.npy")
    for mode in ("squash", "center-crop", "letterbox"):
        p = placement(10, 12, 8, mode)
        out = rules[CUBE.resample](checked, p, CUBE.spec.pad(CUBE.options))
        assert out.shape == CUBE.storage(8).shape and out.dtype == np.uint16
    square = value[:10]
    same = rules[CUBE.resample](square, placement(10, 10, 10, "squash"), 0)
    assert same.tobytes() == square.tobytes()  # the source size: stored bit-exact


def test_decode_array_reads_the_variable_the_field_names_then_the_kind_checks_it(
    tmp_path: Path,
) -> None:
    cube = np.arange(12 * 10 * 5, dtype=np.uint16).reshape(12, 10, 5)
    scipy.io.savemat(tmp_path / "pines.mat", {"cube": cube, "gt": cube[..., 0]})
    data = (tmp_path / "pines.mat").read_bytes()
    named = CUBE.with_options(key="cube")
    value = decode_array(data, "pines.mat", named, 0)
    assert np.array_equal(named.spec.validate(value, "cube", named.options, "pines.mat"), cube)
    with pytest.raises(
        DecodeError, match=r"^pines\.mat: field 'cube': holds 2 variables \['cube', 'gt'\]"
    ):
        decode_array(data, "pines.mat", CUBE, 0)
    with pytest.raises(SpecError, match=r"fields\.cube\.key must be an array or variable name"):
        CUBE.with_options(key="")
