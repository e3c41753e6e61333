"""Build-side geometry: one placement per sample, applied to every spatial field of it.

A :class:`Placement` is the map from a source frame of ``w x h`` pixels into the stored
``S x S`` frame (or ``W x H``: ``--size 512x384``) for a build ``mode`` (the rules of
:mod:`precompute.stages.resize`): the source ``box`` is resized to ``out`` pixels and pasted
at ``offset``. Coordinates follow the pixel-centre convention: pixel ``(i, j)`` covers
``[j, j + 1) x [i, i + 1)``, its centre is ``(j + 0.5, i + 0.5)``, and the placement maps a
point ``x`` to ``(x - box_left) * out_w / box_w + offset_left`` (likewise ``y``), which is
the map Pillow's resize with a box uses for pixel centres. The field's kind names the rule
that applies it (:data:`PLACE`, filled by the kind modules: :func:`register_rule`):

* ``bilinear`` (images, :mod:`precompute.kinds.image`): Pillow's bilinear filter, as in
  format v1, padding ``fill``;
* ``nearest`` (masks, :mod:`precompute.kinds.mask`): each stored pixel takes the source
  pixel its centre falls in, computed in exact integer arithmetic, so values are never
  blended; padding is the ignore index;
* ``affine`` (keypoints, :mod:`precompute.kinds.keypoints`): the map above, exactly; a point
  outside the stored region of the source (cut off by ``center-crop``, or outside the source
  frame) gets visibility 0;
* ``array`` (spatial arrays, :mod:`precompute.kinds.array`): per band;
* ``none``: the value as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size, size_hw
from precompute.errors import DecodeError, SpecError
from precompute.fields.registry import add_entry, entry_for
from precompute.fields.spec import FieldSpec
from precompute.spec import MODES, AugmentPolicy
from precompute.stages.augment import variant_key, variant_params
from precompute.stages.resize import center_crop_box, letterbox_size

__all__ = [
    "PLACE",
    "Placement",
    "check_frame",
    "place_field",
    "placement",
    "register_rule",
    "rule_of",
    "variant_draws",
]


@dataclass(frozen=True)
class Placement:
    """Where a source frame lands in the stored frame.

    Attributes:
        frame: ``(w, h)`` of the source.
        box: ``(left, top, right, bottom)`` of the source region that is resized (half
            pixels possible: the centred square of ``center-crop``).
        out: ``(w, h)`` the box is resized to.
        offset: ``(left, top)`` where the resized box is pasted.
        size: The stored frame: side ``S``, or ``"WxH"`` (:func:`precompute.checks.check_size`).
    """

    frame: tuple[int, int]
    box: tuple[float, float, float, float]
    out: tuple[int, int]
    offset: tuple[int, int]
    size: Size

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of the stored frame."""
        return size_hw(self.size)

    @property
    def extent(self) -> tuple[int, int, int, int]:
        """``(top, left, height, width)`` of the valid stored pixels (format v1's ``extent``)."""
        return (self.offset[1], self.offset[0], self.out[1], self.out[0])


def placement(w: int, h: int, size: Size, mode: str) -> Placement:
    """Return the placement of a ``w x h`` source in a store of frame ``size`` built in ``mode``."""
    whole = (0.0, 0.0, float(w), float(h))
    fh, fw = size_hw(size)
    if mode == "squash":
        return Placement((w, h), whole, (fw, fh), (0, 0), size)
    if mode == "center-crop":
        return Placement((w, h), center_crop_box(w, h, (fw, fh)), (fw, fh), (0, 0), size)
    if mode == "letterbox":
        nw, nh = letterbox_size(w, h, (fw, fh))
        return Placement((w, h), whole, (nw, nh), ((fw - nw) // 2, (fh - nh) // 2), size)
    raise SpecError(f"mode must be one of {MODES}, got {mode!r}")


def variant_draws(
    seed: int, slot: int, count: int, size: int, policy: AugmentPolicy
) -> Callable[[int, int], list[tuple[Placement, Any]]]:
    """``draws(w, h)``: the placement and colour factors of each of ``count`` variants.

    Variant ``v`` of store slot ``slot`` is the crop sampler's draw from
    :func:`~precompute.stages.augment.variant_key` ``(seed, slot, v)``: its random resized
    crop box, resized to ``size x size`` (extent ``(0, 0, S, S)``), and its 3 colour factors.
    """

    def draws(w: int, h: int) -> list[tuple[Placement, Any]]:
        out = []
        for v in range(count):
            box, factors = variant_params(variant_key(seed, slot, v), w, h, policy)
            crop = (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
            out.append((Placement((w, h), crop, (size, size), (0, 0), size), factors))
        return out

    return draws


def _keep(value: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    return value


Rule = Callable[[np.ndarray, Placement, Any], np.ndarray]

# The build's geometry rules, by the names the kinds declare (``FieldSpec.resample``): ``none``
# here, every other one registered by the kind module that owns it (register_rule).
_PLACE: dict[str, Rule] = {"none": _keep}
PLACE: Mapping[str, Rule] = MappingProxyType(_PLACE)
# The old import paths of the rules that moved into their kinds' modules
_MOVED = {
    "place_image": "precompute.kinds.image",
    "place_mask": "precompute.kinds.mask",
    "place_keypoints": "precompute.kinds.keypoints",
}


def __getattr__(name: str) -> Any:
    """``place_image``, ``place_mask``, ``place_keypoints``: from their kinds' modules."""
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_rule(name: str, rule: Rule) -> Rule:
    """Add the build geometry rule ``name`` (``rule(value, placement, pad) -> stored``).

    Raises:
        SpecError: A rule of that name is registered already.
    """
    return add_entry(_PLACE, "build geometry rule", name, rule)


def rule_of(field: FieldSpec) -> Rule:
    """The build rule of ``field``'s kind.

    Raises:
        SpecError: No module registered the kind's rule (the build refuses the field).
    """
    lacks = "which the build lacks (register_rule"
    return entry_for(_PLACE, field.resample, field, "is placed by rule", lacks)


def place_field(field: FieldSpec, value: np.ndarray, p: Placement) -> np.ndarray:
    """Apply the rule of ``field``'s kind to its checked ``value`` with placement ``p``.

    Raises:
        SpecError: The rule returned a shape other than the field's storage, or a dtype that
            does not cast to it by kind (a float into an integer array): a plugin's rule would
            otherwise be broadcast or truncated into the store without a word.
    """
    out = rule_of(field)(value, p, field.spec.pad(field.options))
    want = field.storage(p.size)
    got = np.asarray(out)
    if got.shape != tuple(want.shape) or not np.can_cast(got.dtype, want.dtype, "same_kind"):
        raise SpecError(
            f"fields.{field.name}: the build rule {field.resample!r} of kind {field.kind!r} "
            f"returned {got.dtype} of shape {got.shape}; the field stores {want.dtype} of "
            f"shape {tuple(want.shape)}"
        )
    return out


def check_frame(key: str, field: str, value: np.ndarray, frame: tuple[int, int]) -> None:
    """Refuse a spatial array whose ``(w, h)`` differs from the image's ``frame``.

    Raises:
        DecodeError: Naming the input, the field and both sizes.
    """
    h, w = value.shape[:2]
    if (w, h) != frame:
        swapped = (
            " (width and height swapped: each file is turned by its own EXIF orientation; "
            "is one of the two rotated by EXIF and the other not?)"
            if (h, w) == frame
            else ""
        )
        raise DecodeError(
            key, f"field {field!r} is {w}x{h} but the image is {frame[0]}x{frame[1]}{swapped}"
        )
