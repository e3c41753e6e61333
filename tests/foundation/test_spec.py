import json

import pytest

from precompute.errors import SpecError
from precompute.spec import AugmentPolicy, BuildSpec


def test_round_trip_and_digest_stable():
    spec = BuildSpec(size=64, mode="letterbox", seed=3, variants=2)
    again = BuildSpec.from_dict(json.loads(spec.canonical_json()))
    assert again == spec
    assert again.digest() == spec.digest()
    assert spec.augment == AugmentPolicy()  # derived default, recorded in the dict
    assert spec.to_dict()["augment"]["scale"] == [0.25, 1.0]


def test_digest_ignores_key_order_but_not_values():
    a = BuildSpec.from_dict({"size": 32, "mode": "squash"})
    b = BuildSpec.from_dict({"mode": "squash", "size": 32})
    assert a.digest() == b.digest()
    assert BuildSpec(size=33).digest() != BuildSpec(size=32).digest()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"size": 0}, "size"),
        ({"size": "64"}, "size"),
        ({"mode": "stretch"}, "mode"),
        ({"on_error": "ignore"}, "on_error"),
        ({"shard_samples": 100, "chunk_samples": 32}, "multiple"),
        ({"variants": 1, "augment": AugmentPolicy()}, "augment"),
        ({"size": True}, "size"),
    ],
)
def test_bad_values_name_the_field(kwargs, needle):
    with pytest.raises(SpecError, match=needle):
        BuildSpec(**kwargs)


def test_unknown_fields_are_errors():
    with pytest.raises(SpecError, match="colour"):
        BuildSpec.from_dict({"size": 32, "colour": "red"})
    with pytest.raises(SpecError, match="hue"):
        BuildSpec.from_dict({"variants": 2, "augment": {"hue": 0.1}})
    with pytest.raises(SpecError, match="mapping"):
        BuildSpec.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="augment must be a mapping"):
        BuildSpec.from_dict({"variants": 2, "augment": [0.1, 0.2]})


def test_augment_ranges_validated():
    with pytest.raises(SpecError, match=r"augment\.scale"):
        AugmentPolicy(scale=(0.9, 0.1))
    with pytest.raises(SpecError, match=r"augment\.brightness"):
        AugmentPolicy(brightness=2.0)


def test_max_bytes_keeps_old_digests_at_its_default():
    # digests of specs as stores built before max_bytes existed recorded them
    assert (
        BuildSpec().digest() == "001f46fd816f222d59b340cad2702e929bf9daec8d4b06be9cbe05488f4503d7"
    )
    old = BuildSpec(size=64, mode="letterbox")
    assert old.digest() == "e034d2ab25d180b7912f67a12fd857ef60f6d2380364b9ee5e18313f9a129c68"
    # variants > 1 record the crop sampler's version: stores drawn by the old sampler differ
    drawn = BuildSpec(size=64, mode="letterbox", variants=2)
    assert drawn.digest() != "b97368d6d8d1f8c9ed082eb93f162109a8bc92de42de2947aeb4911f0af2326c"
    assert "max_bytes" not in BuildSpec().to_dict()
    small = BuildSpec(max_bytes=1000)
    assert small.to_dict()["max_bytes"] == 1000 and small.digest() != BuildSpec().digest()
    assert BuildSpec.from_dict(small.to_dict()) == small


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"max_bytes": 0}, "max_bytes must be an integer"),
        ({"max_bytes": "1MB"}, "max_bytes must be an integer"),
        ({"variants": 2, "augment": {"scale": "01"}}, r"augment\.scale must be a \(low, high\)"),
        ({"variants": 2, "augment": {"brightness": True}}, r"augment\.brightness must be a number"),
        ({"variants": 2, "augment": {"contrast": 10**400}}, r"augment\.contrast .* in \[0, 1\]"),
        ({"size": 10**5000}, "an integer of 16610 bits"),
        ({1: 2, "a": 3}, r"unknown build spec field\(s\) \['1', 'a'\]"),
    ],
)
def test_hostile_values_are_one_line_spec_errors(data, needle):
    with pytest.raises(SpecError, match=needle) as info:
        BuildSpec.from_dict(data)
    assert len(str(info.value)) < 200
