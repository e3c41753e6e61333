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
