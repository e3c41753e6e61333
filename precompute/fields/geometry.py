"""Build-side geometry: one placement per sample, applied to every spatial field of it.

A :class:`Placement` is the map from a source frame of ``w x h`` pixels into the stored
``S x S`` frame for a build ``mode`` (the rules of :mod:`precompute.stages.resize`): the
source ``box`` is resized to ``out`` pixels and pasted at ``offset``. Coordinates follow the
pixel-centre convention: pixel ``(i, j)`` covers ``[j, j + 1) x [i, i + 1)``, its centre is
``(j + 0.5, i + 0.5)``, and the placement maps a point ``x`` to
``(x - box_left) * out_w / box_w + offset_left`` (likewise ``y``), which is the map Pillow's
resize with a box uses for pixel centres. The field's kind names the rule that applies it
(:data:`PLACE`):

* ``bilinear`` (images): Pillow's bilinear filter, as in format v1, padding ``fill``;
* ``nearest`` (masks): each stored pixel takes the source pixel its centre falls in, computed
  in exact integer arithmetic, so values are never blended; padding is the ignore index;
* ``affine`` (keypoints): the map above, exactly; a point outside the stored region of the
  source (cut off by ``center-crop``, or outside the source frame) gets visibility 0;
* ``none``: the value as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from precompute.errors import DecodeError, SpecError
from precompute.fields.registry import add_entry, entry_for
from precompute.fields.spec import FieldSpec
from precompute.spec import MODES, AugmentPolicy
from precompute.stages.augment import variant_key, variant_params
from precompute.stages.resize import FILTER, center_crop_box, letterbox_size

__all__ = [
    "PLACE",
    "Placement",
    "check_frame",
    "place_field",
    "place_image",
    "place_keypoints",
    "place_mask",
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
        size: The stored side ``S``.
    """

    frame: tuple[int, int]
    box: tuple[float, float, float, float]
    out: tuple[int, int]
    offset: tuple[int, int]
    size: int

    @property
    def extent(self) -> tuple[int, int, int, int]:
        """``(top, left, height, width)`` of the valid stored pixels (format v1's ``extent``)."""
        return (self.offset[1], self.offset[0], self.out[1], self.out[0])


def placement(w: int, h: int, size: int, mode: str) -> Placement:
    """Return the placement of a ``w x h`` source in a store of side ``size`` built in ``mode``."""
    whole = (0.0, 0.0, float(w), float(h))
    if mode == "squash":
        return Placement((w, h), whole, (size, size), (0, 0), size)
    if mode == "center-crop":
        return Placement((w, h), center_crop_box(w, h), (size, size), (0, 0), size)
    if mode == "letterbox":
        nw, nh = letterbox_size(w, h, size)
        return Placement((w, h), whole, (nw, nh), ((size - nw) // 2, (size - nh) // 2), size)
    raise SpecError(f"mode must be one of {MODES}, got {mode!r}")


def variant_draws(
    seed: int, slot: int, count: int, size: int, policy: AugmentPolicy
) -> Callable[[int, int], list[tuple[Placement, Any]]]:
    """``draws(w, h)``: the placement and colour factors of each of ``count`` variants.

    Variant ``v`` of store slot ``slot`` is the box sampler's draw from
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


def place_image(pixels: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Resize ``(H, W, C)`` uint8 pixels (C = 1 or 3) bilinear into the stored frame."""
    c = pixels.shape[2]
    img = Image.fromarray(pixels[..., 0] if c == 1 else pixels, "L" if c == 1 else "RGB")
    out = np.full((p.size, p.size, c), pad, dtype=np.uint8)
    resized = np.asarray(img.resize(p.out, FILTER, box=p.box), dtype=np.uint8)
    top, left, h, w = p.extent
    out[top : top + h, left : left + w] = resized.reshape(h, w, c)
    return out


def _nearest(start2: int, length: int, n: int) -> np.ndarray:
    """Source indices of ``n`` output pixels over ``[start2 / 2, start2 / 2 + length)``.

    Output pixel ``j`` takes ``floor(start + (j + 0.5) * length / n)``, all in integers.
    """
    j = np.arange(n, dtype=np.int64)
    return (start2 * n + (2 * j + 1) * length) // (2 * n)


def place_mask(mask: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Resize an ``(H, W)`` mask nearest-neighbour into the stored frame, padding ``pad``."""
    left, top, right, bottom = p.box
    rows = _nearest(round(2 * top), round(bottom - top), p.out[1]).clip(0, p.frame[1] - 1)
    cols = _nearest(round(2 * left), round(right - left), p.out[0]).clip(0, p.frame[0] - 1)
    out = np.full((p.size, p.size), pad, dtype=mask.dtype)
    t, lf, h, w = p.extent
    out[t : t + h, lf : lf + w] = mask[rows[:, None], cols[None, :]]
    return out


def place_keypoints(points: np.ndarray, p: Placement, pad: Any = 0.0) -> np.ndarray:
    """Map ``(P, 3)`` keypoints exactly into the stored frame; points left out get ``v = 0``."""
    left, top, right, bottom = p.box
    x = (points[:, 0].astype(np.float64) - left) * (p.out[0] / (right - left)) + p.offset[0]
    y = (points[:, 1].astype(np.float64) - top) * (p.out[1] / (bottom - top)) + p.offset[1]
    t, lf, h, w = p.extent
    inside = (x >= lf) & (x < lf + w) & (y >= t) & (y < t + h)
    v = np.where(inside, points[:, 2], 0.0)
    return np.stack([x, y, v], axis=1).astype(np.float32)


def _keep(value: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    return value


Rule = Callable[[np.ndarray, Placement, Any], np.ndarray]


# The build's geometry rules, by the names the kinds declare (``FieldSpec.resample``).
def _array(value: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Spatial arrays per band (``precompute.arrays.resample.place_array``)."""
    from precompute.arrays.resample import place_array  # lazy: it imports Placement

    return place_array(value, p, pad)


_PLACE: dict[str, Rule] = {
    "bilinear": place_image,
    "nearest": place_mask,
    "affine": place_keypoints,
    "none": _keep,
    "array": _array,  # spectral cubes (docs/arrays.md)
}
PLACE: Mapping[str, Rule] = MappingProxyType(_PLACE)


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
    """Apply the rule of ``field``'s kind to its checked ``value`` with placement ``p``."""
    return rule_of(field)(value, p, field.spec.pad(field.options))


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
