"""The loader's tables are open to kind modules: geometry, rotate-90 and mix rules by name.

A test kind registers its own torch functions into :mod:`precompute.kinds.hooks` (as a kind
module of another package would, without importing :mod:`loaders`); the loader's generic
code calls them for a field of that kind, and refuses a field whose rule nobody registered,
naming the field and the rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
import torch

from loaders.augment import AugmentError, EvalAugment, Mixup, TrainAugment
from loaders.augment.arrays.rot90 import rotate_field
from loaders.augment.crop import CropParams
from loaders.augment.fields import check_field_policies
from loaders.augment.mix import mix_fields
from loaders.augment.rules import apply_field
from precompute.errors import SpecError
from precompute.fields import FieldSpec, Kind, Storage, register_kind
from precompute.fields import kinds as kinds_module
from precompute.fields.options import Option, integer
from precompute.kinds import hooks
from precompute.kinds.hooks import MixDraw

CALLS: list[str] = []


def _shift(values: torch.Tensor, crops: CropParams, size: Any, options: Any) -> torch.Tensor:
    CALLS.append("crop")
    return values + crops.left.to(values.dtype)[:, None] + options["offset"]


def _turn(values: torch.Tensor, k: torch.Tensor, size: int) -> torch.Tensor:
    CALLS.append("rot90")
    return values * 10 + k.to(values.dtype)[:, None]


def _sum(values: torch.Tensor, field: FieldSpec, draw: MixDraw) -> torch.Tensor:
    CALLS.append("mixup")
    return values + values.flip(0)


def _max(values: torch.Tensor, field: FieldSpec, draw: MixDraw) -> torch.Tensor:
    CALLS.append("cutmix")
    return torch.maximum(values, values.flip(0)) + draw.box.sum()


class Tally(Kind):
    """Test kind: ``(2,)`` float32 values moved by rules no built-in kind uses."""

    name = "tally_test"
    source = "inline"
    spatial = True
    augment = "tally"
    mixup, cutmix = "tally-sum", "tally-max"
    options = {"offset": Option(0, integer(0, 100))}

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((2,), "float32", 0.0)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(value, np.float32)


class Unknown(Tally):
    """Test kind naming rules that nobody registered."""

    name = "unknown_test"
    augment = "warp_test"
    mixup, cutmix = "smear_test", "refuse"


@pytest.fixture(autouse=True)
def tally() -> Iterator[None]:
    register_kind(Tally())
    register_kind(Unknown())
    hooks.register_loader_rule("tally", _shift)
    hooks.register_rot90("tally", _turn)
    hooks.register_mix_rule("mixup", "tally-sum", _sum)
    hooks.register_mix_rule("cutmix", "tally-max", _max)
    CALLS.clear()
    yield
    del kinds_module._KINDS["tally_test"], kinds_module._KINDS["unknown_test"]
    del hooks._LOADER["tally"], hooks._ROT90["tally"]
    del hooks._MIX["mixup"]["tally-sum"], hooks._MIX["cutmix"]["tally-max"]


def _crops(b: int) -> CropParams:
    zeros = torch.zeros(b, dtype=torch.int64)
    left = torch.arange(b, dtype=torch.int64)
    return CropParams(zeros, left, zeros + 4, zeros + 4, zeros)


def test_a_kinds_loader_rule_and_rotation_are_called_by_the_generic_loader() -> None:
    field = FieldSpec("t", "tally_test", {"offset": 7})
    values = torch.ones(3, 2)
    out = apply_field(field, values, _crops(3), (4, 4))
    assert out[:, 0].tolist() == [8.0, 9.0, 10.0]  # 1 + left + offset
    k = torch.tensor([0, 1, 3])
    assert rotate_field(field.augment, out, k, 4)[:, 1].tolist() == [80.0, 91.0, 103.0]
    assert CALLS == ["crop", "rot90"]


def test_two_mix_rules_are_both_called_and_the_drawn_one_kept() -> None:
    fields = [FieldSpec("image", "image"), FieldSpec("t", "tally_test")]
    images = torch.rand(4, 3, 8, 8)
    tally = torch.tensor([[1.0, 2.0], [5.0, 0.0], [3.0, 3.0], [0.0, 9.0]])
    values = {"image": images, "t": tally}
    only_mixup = Mixup(2, mixup_alpha=1.0, cutmix_alpha=0.0)
    out = mix_fields(only_mixup, values, fields, torch.Generator().manual_seed(0))
    assert torch.equal(out["t"], tally + tally.flip(0))
    only_cutmix = Mixup(2, mixup_alpha=0.0, cutmix_alpha=1.0)
    out = mix_fields(only_cutmix, values, fields, torch.Generator().manual_seed(0))
    box = only_cutmix.params(8, 8, torch.Generator().manual_seed(0), torch.device("cpu")).box
    assert torch.equal(out["t"], torch.maximum(tally, tally.flip(0)) + box.sum())
    assert CALLS == ["cutmix", "mixup"] * 2  # the two rules differ: both run, one is kept


def test_a_rule_nobody_registered_is_refused_naming_field_and_rule() -> None:
    field = FieldSpec("w", "unknown_test")
    with pytest.raises(
        AugmentError,
        match=r"field 'w': kind 'unknown_test' needs geometry rule "
        r"'warp_test', which the torch loader does not implement",
    ):
        apply_field(field, torch.ones(2, 2), _crops(2), (4, 4))
    # and before the first batch: what StoreLoader(...) checks when it is made
    image = FieldSpec("image", "image")
    check_field_policies([image, FieldSpec("t", "tally_test")], TrainAugment(size=4), None)
    for augment in (TrainAugment(size=4), EvalAugment(size=4)):
        with pytest.raises(AugmentError, match=r"field 'w': kind 'unknown_test' needs geometry"):
            check_field_policies([image, field], augment, None)
    check_field_policies([image, field], None, None)  # no geometry: no rule needed
    with pytest.raises(AugmentError, match=r"geometry rule 'warp_test' has no rotate-90"):
        rotate_field(field.augment, torch.ones(2, 2), torch.zeros(2, dtype=torch.int64), 4)
    mix = Mixup(2, mixup_alpha=1.0, cutmix_alpha=0.0)
    with pytest.raises(
        AugmentError,
        match=r"field 'w' \(kind unknown_test\): no mixup rule "
        r"named 'smear_test' is registered",
    ):
        mix.check_fields([FieldSpec("image", "image"), field])


def test_the_tables_refuse_a_second_entry_and_a_rule_named_refuse() -> None:
    with pytest.raises(SpecError, match=r"a loader geometry rule named 'tally' is registered"):
        hooks.register_loader_rule("tally", _shift)
    with pytest.raises(SpecError, match=r"a rotate-90 rule named 'nearest' is registered"):
        hooks.register_rot90("nearest", _turn)
    with pytest.raises(SpecError, match=r"'refuse' names a refused method"):
        hooks.register_mix_rule("cutmix", "refuse", _max)
    with pytest.raises(SpecError, match=r"method is one of \['mixup', 'cutmix'\], got 'blend'"):
        hooks.register_mix_rule("blend", "x", _max)
    assert hooks.LOADER_RULES["nearest"] is not None  # the loader's built-ins are there too
    with pytest.raises(TypeError):
        hooks.LOADER_RULES["x"] = _shift  # type: ignore[index]
