"""precompute.policy: one table of defaults and bounds; the offline sampler in the spec hash."""

import hashlib
import json
import subprocess
import sys

import pytest

from loaders.augment import CenterCrop, ColorJitter, HorizontalFlip, Normalize, RandomResizedCrop
from loaders.augment.errors import AugmentError
from loaders.dali.params import DaliAugment
from precompute.errors import SpecError
from precompute.policy import (
    BOUNDS,
    EVAL_CENTER,
    IMAGENET_MEAN,
    IMAGENET_STD,
    POLICIES,
    Policy,
)
from precompute.spec import AugmentPolicy, BuildSpec


def test_every_backend_takes_its_defaults_from_the_table():
    offline, online, dali = POLICIES["offline"], POLICIES["online"], POLICIES["dali"]
    assert AugmentPolicy().policy == offline
    crop, flip, jitter = RandomResizedCrop(), HorizontalFlip(), ColorJitter()
    got = Policy(
        crop.scale,
        crop.ratio,
        crop.attempts,
        flip.p,
        (jitter.brightness, jitter.contrast, jitter.saturation),
    )
    assert got == online
    assert DaliAugment().policy == dali
    assert Normalize() == Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD)
    assert (DaliAugment().mean, DaliAugment().std) == (IMAGENET_MEAN, IMAGENET_STD)
    assert CenterCrop().fraction == EVAL_CENTER
    assert offline.scale == (0.25, 1.0) and offline.jitter == (0.3, 0.3, 0.3)
    assert online.scale == (0.08, 1.0) and online.jitter == (0.4, 0.4, 0.4)
    assert dali.jitter == (0.0, 0.0, 0.0) and dali.flip == online.flip == 0.5


@pytest.mark.parametrize("bound", ["scale", "ratio", "jitter", "flip"])
def test_every_backend_refuses_the_same_out_of_bounds_values(bound):
    lo, high = BOUNDS[bound]
    bad, hi = high * 1.5, f"{high:g}"  # the bound as messages give it
    pair = bound in ("scale", "ratio")
    value = (lo, bad) if pair else bad
    spec_field = {"jitter": "brightness", "scale": "scale", "ratio": "ratio"}.get(bound)
    if spec_field:
        with pytest.raises(SpecError, match=rf"augment\.{spec_field}.*{hi}"):
            AugmentPolicy(**{spec_field: value})
    op = {
        "scale": RandomResizedCrop,
        "ratio": RandomResizedCrop,
        "jitter": ColorJitter,
        "flip": HorizontalFlip,
    }[bound]
    op_field = {"jitter": "brightness", "flip": "p"}.get(bound, bound)
    with pytest.raises(AugmentError, match=rf"{op.name}\.{op_field}.*{hi}"):
        op(**{op_field: value})
    dali_field = {"jitter": "brightness"}.get(bound, bound)
    with pytest.raises(AugmentError, match=rf"{dali_field}.*{hi}"):
        DaliAugment(**{dali_field: value})


def test_the_offline_sampler_version_is_part_of_the_spec_identity():
    spec = BuildSpec(size=16, variants=2)
    data = spec.to_dict()
    assert data["augment"]["sampler"] == AugmentPolicy.SAMPLER == 2
    assert BuildSpec.from_dict(json.loads(spec.canonical_json())) == spec
    # a spec as stores built before the sampler was named recorded it: another identity
    old = json.loads(spec.canonical_json())
    del old["augment"]["sampler"]
    old_digest = hashlib.sha256(
        json.dumps(old, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert BuildSpec.from_dict(old).digest() != old_digest
    assert BuildSpec.from_dict(old) == spec  # still readable: hand-written specs omit it
    assert "sampler" not in json.dumps(BuildSpec(size=16).to_dict())  # no variants: unchanged
    old["augment"]["sampler"] = 1
    with pytest.raises(SpecError, match=r"augment\.sampler 1 .* sampler 2"):
        BuildSpec.from_dict(old)


def test_the_policy_modules_import_no_heavy_backend():
    code = (
        "import sys, precompute.policy, precompute.cropsampler, precompute.spec; "
        "print(sorted(m for m in ('torch', 'ray', 'nvidia.dali') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_draw_key_is_any_torch_seed_and_nothing_else():
    from precompute import cropsampler

    assert cropsampler.generator(2**64 - 1).random() == cropsampler.generator(2**64 - 1).random()
    for bad in (-1, 2**64, 1.5, True):
        with pytest.raises(ValueError, match=r"draw key must be an integer in \[0, 2\*\*64 - 1\]"):
            cropsampler.generator(bad)
