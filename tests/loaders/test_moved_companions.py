"""Companions that follow their value (``Kind.moved_companions``): build, geometry and mixing.

A test kind stores four x coordinates and the count of those inside the frame; its rules
push coordinates out of the frame (-1), so the count must be recomputed after every move:
by the build after the placement, by a policy's ``apply_fields`` and by ``Mixup``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from loaders.augment import EvalAugment, Mixup
from loaders.augment.image.ops import CenterCrop
from loaders.augment.mix import mix_fields
from precompute.fields import FieldSpec, Kind, Storage, register_kind
from precompute.fields import kinds as kinds_module
from precompute.fields.assemble import assemble
from precompute.fields.geometry import _PLACE as PLACE
from precompute.fields.geometry import Placement, register_rule
from precompute.kinds import hooks
from precompute.sources.fields import FieldItem


def _place(value: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    x = (value - p.box[0]) * (p.out[0] / (p.box[2] - p.box[0])) + p.offset[0]
    return np.where((x >= 0) & (x < p.size) & (value >= 0), x, -1).astype(np.float32)


def _crop(values: torch.Tensor, crops: Any, size: Any, options: Any) -> torch.Tensor:
    x = values - crops.left.to(values.dtype)[:, None]
    return torch.where((x >= 0) & (x < size[1]) & (values >= 0), x, -1.0)


def _mix(values: torch.Tensor, field: FieldSpec, draw: Any) -> torch.Tensor:
    return torch.maximum(values, values.flip(0))


class Spots(Kind):
    """Test kind: four x coordinates, -1 when out of the frame; ``inside`` counts the others."""

    name = "spots_test"
    source = "inline"
    spatial = True
    resample = augment = "spots"
    mixup, cutmix = "spots", "refuse"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        return Storage((4,), "float32", -1.0)

    def companions(self, opts: Mapping[str, Any], size: int) -> Mapping[str, Storage]:
        return {"inside": Storage((), "int16", 0)}

    def companion_values(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"inside": np.int16(len(value))}  # before the placement: all four

    def moved_companions(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"inside": (value >= 0).sum(-1)}

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(value, np.float32)


@pytest.fixture(autouse=True)
def spots() -> Iterator[None]:
    register_kind(Spots())
    register_rule("spots", _place)
    hooks.register_loader_rule("spots", _crop)
    hooks.register_mix_rule("mixup", "spots", _mix)
    yield
    del kinds_module._KINDS["spots_test"], PLACE["spots"], hooks._LOADER["spots"]
    del hooks._MIX["mixup"]["spots"]


def _fields() -> list[FieldSpec]:
    return [FieldSpec("image", "image"), FieldSpec("spots", "spots_test")]


def test_the_build_stores_the_count_of_the_placed_value() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (40, 20)).save(buf, "PNG")
    item = FieldItem("a.png", (("image", "a.png"),), (("spots", (1.0, 15.0, 25.0, 39.0)),))
    out, _ = assemble(item, _fields(), lambda i, f: buf.getvalue(), 20, "center-crop", 10**6)
    assert out["spots"].tolist() == [-1, 5, 15, -1]  # the square [10, 30] keeps two
    assert out["spots.inside"].dtype == np.int16 and int(out["spots.inside"]) == 2


def test_a_policy_and_a_mixup_recount_after_they_move_the_values() -> None:
    values = {
        "image": torch.zeros(2, 8, 8, 3, dtype=torch.uint8),
        "spots": torch.tensor([[1.0, 3, 6, 7], [0, 1, 2, -1]]),
        "spots.inside": torch.tensor([4, 3], dtype=torch.int16),
    }
    extents = torch.tensor([[0, 0, 8, 8], [0, 0, 8, 8]], dtype=torch.int32)
    policy = EvalAugment(size=(4, 4), crop=CenterCrop(1.0))  # the centre 8 x 8, to 4 x 4
    out = policy.apply_fields(values, _fields(), extents)
    assert out["spots"].tolist() == [[1, 3, -1, -1], [0, 1, 2, -1]]
    assert out["spots.inside"].dtype == torch.int16 and out["spots.inside"].tolist() == [2, 3]
    out["image"] = out["image"].float()
    mixed = mix_fields(Mixup(2, cutmix_alpha=0.0), out, _fields(), torch.Generator())
    assert mixed["spots"].tolist() == [[1, 3, 2, -1]] * 2
    assert mixed["spots.inside"].tolist() == [3, 3]
