"""The one registry of field kinds: what a kind decides, declared once per kind.

A field is a named array over samples; its kind decides everything about it, here and only
here, so the build, the loader and DALI look the kind up instead of testing its name:

* **source**: ``file`` (a path to an encoded file, decoded by the build by the kind's
  ``decoder``: ``image``, ``mask`` or ``npy``) or ``inline`` (a value written in the
  manifest: keypoints, labels);
* **storage**: the per-sample shape, dtype and hole value (:meth:`Kind.storage`);
* **validation** of a decoded or parsed value, with an error naming the file, the field and
  the value (:meth:`Kind.validate`);
* **geometry**: how the build's resize/letterbox/crop touches it (``resample``: ``bilinear``,
  ``nearest``, ``affine`` or ``none``; ``pad``: the letterbox padding value) and how the
  loader's geometric draw does (``augment``: the same rule names, one draw per sample for all
  spatial fields); ``photometric`` ops touch a kind only if it says so;
* **mixing**: ``mixup`` (``blend``, or ``refuse``: a clear error) and ``cutmix`` (``paste``
  the same box, ``area``: mix by the pasted area, or ``refuse``).

The rule names are keys of small function tables in each backend
(:data:`precompute.fields.geometry.PLACE`, :data:`loaders.augment.rules.APPLY`): a backend
that lacks a rule refuses the field by name. New kinds (``audio``) are added with
:func:`register_kind`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.errors import SpecError
from precompute.fields import values
from precompute.fields.base import Kind, Storage
from precompute.fields.options import (
    REQUIRED,
    Option,
    check_count,
    check_dtype,
    check_pairs,
    check_rgb_table,
    check_shape,
    integer,
    one_of,
    optional,
)
from precompute.fields.position import PositionKind
from precompute.fields.registry import add_entry, load_plugins
from precompute.policy import show
from precompute.sources.manifests import MAX_LABEL

__all__ = ["KINDS", "Kind", "Storage", "kind_of", "register_kind"]


class ImageKind(Kind):
    """``(H, W, C)`` uint8 pixels, C = 1 or 3: resized bilinear, jittered, mixed."""

    name = "image"
    source = "file"
    decoder = "image"
    spatial = True
    resample = augment = "bilinear"
    photometric = True
    mixup, cutmix = "blend", "paste"
    options = MappingProxyType(
        {"channels": Option(3, one_of(1, 3)), "fill": Option(0, integer(0, 255))}
    )

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``(S, S, C)`` uint8, holes black."""
        return Storage((size, size, opts["channels"]), "uint8", 0)

    def pad(self, opts: Mapping[str, Any]) -> int:
        """The ``fill`` option."""
        return int(opts["fill"])

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An ``(H, W, channels)`` uint8 array."""
        return values.pixels(value, opts["channels"])


class MaskKind(Kind):
    """``(H, W)`` class ids: resized nearest only, padded ``ignore_index``, pasted by CutMix."""

    name = "mask"
    source = "file"
    decoder = "mask"
    spatial = True
    resample = augment = "nearest"
    cutmix = "paste"
    options = MappingProxyType(
        {
            "classes": Option(REQUIRED, check_count),
            "ignore_index": Option(255, integer(0, 65535)),
            "colormap": Option(None, optional(check_rgb_table)),
        }
    )

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """``ignore_index`` is no class id; a colour map has one colour per class."""
        if opts["ignore_index"] < opts["classes"]:
            raise SpecError(
                f"fields.{field}.ignore_index {opts['ignore_index']} is a class id "
                f"(classes: {opts['classes']}); use a value >= classes"
            )
        table = opts["colormap"]
        if table is not None and len(table) != opts["classes"]:
            raise SpecError(
                f"fields.{field}.colormap has {len(table)} colours for "
                f"{opts['classes']} classes; give one [r, g, b] per class"
            )

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``(S, S)`` uint8 (uint16 beyond 255), holes and padding ``ignore_index``."""
        wide = max(opts["classes"] - 1, opts["ignore_index"]) > 255
        return Storage((size, size), "uint16" if wide else "uint8", opts["ignore_index"])

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An ``(H, W)`` integer array of class ids below ``classes`` or ``ignore_index``."""
        dtype = self.storage(opts, 1).dtype
        return values.class_ids(value, opts["classes"], opts["ignore_index"], dtype)

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Every stored value is a class id or ``ignore_index``."""
        flat = stored.reshape(-1, stored.shape[-1]) if stored.size else stored.reshape(1, 1)
        values.class_ids(flat, opts["classes"], opts["ignore_index"], str(stored.dtype))


class KeypointsKind(Kind):
    """``(P, 3)`` float32 ``(x, y, visible)`` in pixel-centre coordinates: mapped exactly."""

    name = "keypoints"
    source = "inline"
    spatial = True
    resample = augment = "affine"
    count_option = "points"
    options = MappingProxyType(
        {"points": Option(None, optional(check_count)), "flip_pairs": Option((), check_pairs)}
    )

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """Flip pairs name existing points."""
        points = opts["points"]
        worst = max((max(p) for p in opts["flip_pairs"]), default=-1)
        if points is not None and worst >= points:
            raise SpecError(
                f"fields.{field}.flip_pairs names point {worst}; there are "
                f"{points} points (0..{points - 1})"
            )

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``(points, 3)`` float32; a hole's points are invisible."""
        if opts["points"] is None:
            raise SpecError(
                "keypoints storage needs the point count: set option 'points' "
                "(a build learns it from the source)"
            )
        return Storage((opts["points"], 3), "float32", 0.0)

    def pad(self, opts: Mapping[str, Any]) -> float:
        """Unused: points are mapped, not padded."""
        return 0.0

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """A ``(points, 3)`` array of finite coordinates, visibility 0, 1 or 2."""
        return values.keypoints(value, opts["points"])

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``points``: the count of the first item (the source checks that all agree)."""
        return {"points": len(found[0])} if opts["points"] is None and found else {}

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Finite coordinates, visibility 0, 1 or 2."""
        values.keypoints(stored.reshape(-1, 3), None)

    def parse_inline(self, raw: Any) -> Any:
        """A JSON list (or its text) of ``[x, y]`` or ``[x, y, v]``; ``v`` defaults to 1."""
        return values.parse_points(raw)


def _flag(where: str, value: Any) -> bool:
    """A JSON boolean (``true``/``false``); other values, 0 and 1 included, are refused."""
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, got {show(value)}")
    return value


def _variable(where: str, value: Any) -> str:
    """A non-empty name (an ``.npz`` member, a ``.mat`` variable)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise SpecError(f"{where} must be an array or variable name, got {show(value)}")
    return value


class ArrayKind(Kind):
    """Any shape, dtype kept; with ``spatial: true`` an ``(H, W, C)`` cube in the image frame.

    A plain array is stored as given, untouched by geometry and augmentation. A spatial one
    (a spectral cube) declares its source shape ``[H, W, C]``; it is stored ``(S, S, C)``,
    placed by the build rule ``array`` (:func:`precompute.arrays.resample.place_array`:
    per-band antialiased resampling in float64, bit-exact at the source size) and cropped by
    the loader rule ``array`` (:func:`loaders.augment.arrays.bands.crop_arrays`). ``key`` names the
    ``.npz`` member or ``.mat`` variable to read when a file holds several (``--key``).
    """

    name = "array"
    source = "file"
    decoder = "array"
    options = MappingProxyType(
        {
            "shape": Option(REQUIRED, check_shape),
            "dtype": Option(REQUIRED, check_dtype),
            "spatial": Option(False, _flag),
            "key": Option(None, optional(_variable)),
        }
    )

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """A spatial array is ``[H, W, C]``."""
        if opts["spatial"] and len(opts["shape"]) != 3:
            raise SpecError(
                f"fields.{field}.shape is {list(opts['shape'])}; a spatial array is [H, W, C]"
            )

    def rules(self, opts: Mapping[str, Any]) -> tuple[bool, str, str]:
        """``(True, "array", "array")`` for a spatial array, else untouched (``none``)."""
        if opts["spatial"]:
            return True, "array", "array"
        return False, "none", "none"

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """The declared shape (``(S, S, C)`` when spatial) and dtype, holes zero."""
        shape = tuple(opts["shape"])
        return Storage((size, size, shape[2]) if opts["spatial"] else shape, opts["dtype"], 0)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An array of the declared shape and dtype (:func:`values.exact_array`)."""
        return values.exact_array(value, tuple(opts["shape"]), opts["dtype"])


class LabelKind(Kind):
    """One int64 class index per sample (``-1`` marks a hole, as in format v1)."""

    name = "label"
    source = "inline"
    mixup, cutmix = "blend", "area"
    class_names = True
    class_index = True
    options = MappingProxyType({"classes": Option(None, optional(check_count))})

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``()`` int64, holes ``-1``."""
        return Storage((), "int64", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An integer in ``[0, classes)`` (``[0, MAX_LABEL]`` without ``classes``)."""
        top = opts["classes"] if opts["classes"] is not None else MAX_LABEL + 1
        return np.asarray(values.class_index(value, top), dtype=np.int64)

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``classes``: the largest label + 1 (names are indices by now)."""
        return {"classes": max(found) + 1} if opts["classes"] is None and found else {}

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Every label is a class index."""
        top = opts["classes"] if opts["classes"] is not None else MAX_LABEL + 1
        bad = stored[(stored < 0) | (stored >= top)]
        if bad.size:
            raise ValueError(f"label {int(bad[0])} is outside the classes 0..{top - 1}")

    def parse_inline(self, raw: Any) -> Any:
        """An integer (a JSON integer or digits) or a class name."""
        return values.parse_label(raw)


class LabelsKind(Kind):
    """Multi-label tags: a multi-hot ``(classes,)`` uint8 vector from a list of indices."""

    name = "labels"
    source = "inline"
    mixup, cutmix = "blend", "area"
    class_names = True
    options = MappingProxyType({"classes": Option(None, optional(check_count))})

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``(classes,)`` uint8, holes all zero."""
        if opts["classes"] is None:
            raise SpecError(
                "labels storage needs the class count: set option 'classes' "
                "(a build learns it from the source)"
            )
        return Storage((opts["classes"],), "uint8", 0)

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``classes``: the largest index + 1 (names are indices by now)."""
        top = max((max(v) for v in found if v), default=0) + 1
        return {"classes": top} if opts["classes"] is None and found else {}

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Multi-hot: every value 0 or 1."""
        if stored.size and int(stored.max()) > 1:
            raise ValueError(f"multi-hot value {int(stored.max())} is not 0 or 1")

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """A list of distinct class indices below ``classes`` -> multi-hot."""
        hot = np.zeros(opts["classes"], dtype=np.uint8)
        for index in values.index_list(value, opts["classes"]):
            hot[index] = 1
        return hot

    def parse_inline(self, raw: Any) -> Any:
        """A JSON list (or its text) of class indices or class names."""
        return values.parse_label_list(raw)


_KINDS: dict[str, Kind] = {}


class _Registry(Mapping[str, Kind]):
    """The kinds by name, read-only; the plugin kinds are loaded on the first look-up."""

    def __getitem__(self, name: str) -> Kind:
        load_plugins()
        return _KINDS[name]

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(_KINDS)

    def __len__(self) -> int:
        load_plugins()
        return len(_KINDS)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in _KINDS


KINDS: Mapping[str, Kind] = _Registry()


def register_kind(kind: Kind) -> Kind:
    """Add ``kind`` to the registry under its name (a second kind of that name is refused)."""
    return add_entry(_KINDS, "field kind", kind.name, kind)


def kind_of(name: Any, field: str = "?") -> Kind:
    """Return the registered kind ``name``; a :class:`SpecError` naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        raise SpecError(f"fields.{field}.kind must be one of {sorted(KINDS)}, got {name!r}")
    return _KINDS[name]


for _kind in (ImageKind(), MaskKind(), KeypointsKind(), ArrayKind(), LabelKind(), LabelsKind()):
    register_kind(_kind)
register_kind(PositionKind())  # scene patches' (row, col) (precompute/fields/position.py)
