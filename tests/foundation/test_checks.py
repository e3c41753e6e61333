"""The one set of number checks every package's settings go through."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from loaders.augment import AudioAugment, Mixup
from loaders.augment.errors import AugmentError
from loaders.contract import check_int
from precompute.checks import check_integer, check_number, check_pair
from precompute.errors import SpecError
from precompute.spec import BuildSpec


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3)])
def test_integers_of_any_integer_type_are_ints(value: object) -> None:
    got = check_integer("n", value, 0, 10)
    assert got == 3 and type(got) is int


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "True"), (np.bool_(True), "np.True_"), (3.0, "3.0"), ("3", "'3'"), (None, "None")],
)
def test_bools_floats_and_strings_are_not_integers(value: object, shown: str) -> None:
    with pytest.raises(SpecError, match=rf"^n must be an integer in \[0, 10\], got {shown}$"):
        check_integer("n", value, 0, 10, SpecError)


def test_huge_values_are_refused_without_overflow_and_shown_short() -> None:
    with pytest.raises(
        ValueError, match=r"n must be an integer >= 0, got <an integer of \d+ bits>"
    ):
        check_integer("n", -(10**5000), 0)
    with pytest.raises(ValueError, match=r"x must be a number in \[0, 1\], got 1000+\.\.\.$"):
        check_number("x", 10**400, 0, 1)


@pytest.mark.parametrize("value", [0.25, np.float32(0.25), Fraction(1, 4), np.float64(0.25)])
def test_numbers_of_any_real_type_are_floats(value: object) -> None:
    got = check_number("x", value, 0, 1)
    assert got == 0.25 and type(got) is float


@pytest.mark.parametrize("value", [float("nan"), np.nan, float("inf"), True, "0.5", 1 + 0j])
def test_nan_inf_bools_strings_and_complex_are_not_numbers_in_range(value: object) -> None:
    with pytest.raises(ValueError, match=r"^x must be a number in \[0, 1\], got "):
        check_number("x", value, 0, 1)


def test_pairs_are_ordered_tuples_of_numbers() -> None:
    assert check_pair("r", [np.float32(0.5), 1], 0, 1) == (0.5, 1.0)
    with pytest.raises(ValueError, match=r"r low 0\.9 is above high 0\.1"):
        check_pair("r", (0.9, 0.1), 0, 1)
    with pytest.raises(ValueError, match=r"r must be a \(low, high\) pair of dB, got 0\.5"):
        check_pair("r", 0.5, 0, 1, unit="dB")


def test_every_package_refuses_the_same_way_in_its_own_error_type() -> None:
    """The spec, the augment policies and the loader settings: one check, one message."""
    with pytest.raises(SpecError, match=r"^variants must be an integer in \[1, 64\], got True$"):
        BuildSpec(size=16, variants=True)
    with pytest.raises(AugmentError, match=r"^audio\.freq_masks must be an integer in \[0, 32\]"):
        AudioAugment(freq_masks=True)
    with pytest.raises(ValueError, match=r"^batch_size must be an integer >= 1, got True$"):
        check_int("batch_size", True, 1)
    assert (
        BuildSpec(size=np.int64(16)).size == 16 and type(BuildSpec(size=np.int64(16)).size) is int
    )
    assert Mixup(num_classes=np.int32(5)).num_classes == 5  # a count that went through numpy


def test_whole_number_settings_keep_the_spec_identity() -> None:
    """An int where a float is meant (brightness 0) is stored as the float: same spec hash."""
    from precompute.spec import AugmentPolicy

    as_int = BuildSpec(size=16, variants=2, augment=AugmentPolicy(brightness=0, scale=(1, 1)))
    as_float = BuildSpec(
        size=16, variants=2, augment=AugmentPolicy(brightness=0.0, scale=(1.0, 1.0))
    )
    assert as_int.to_dict() == as_float.to_dict()
    assert as_int.canonical_json() == as_float.canonical_json()
    assert as_int.digest() == as_float.digest()
