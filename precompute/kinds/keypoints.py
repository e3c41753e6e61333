"""The ``keypoints`` kind: ``(P, 3)`` float32 ``(x, y, visible)``, mapped exactly.

Written inline in a manifest (a JSON list of ``[x, y]`` or ``[x, y, v]``), placed by the
build's exact map (rule ``affine``: :func:`place_keypoints`; a point outside the stored region
gets visibility 0, and the build notes samples that lost points: :meth:`KeypointsKind.placed`),
mapped by the loader's crop, flip (with ``flip_pairs`` swapped: ``--flip-pairs``) and quarter
turns (``loaders.augment.rules.crop_keypoints``, ``rot90_keypoints``), never mixed. The point
count is learned from the source (``count_option``: every row gives that many).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size
from precompute.errors import SpecError
from precompute.fields import values
from precompute.fields.base import Kind, Storage
from precompute.fields.geometry import PLACE, Placement, register_rule
from precompute.fields.options import (
    ColumnClaim,
    Flag,
    Option,
    SuffixClaim,
    check_count,
    check_pairs,
    optional,
)
from precompute.fields.registry import has_kind, register_kind
from precompute.notes import note

__all__ = ["KeypointsKind", "place_keypoints"]


class KeypointsKind(Kind):
    """``(P, 3)`` float32 ``(x, y, visible)`` in pixel-centre coordinates: mapped exactly."""

    name = "keypoints"
    source = "inline"
    spatial = True
    resample = augment = "affine"
    count_option = "points"
    columns = ColumnClaim(("nested_list",), ("keypoints", "kp", "landmarks"), priority=50)
    suffixes = SuffixClaim(("json:keypoints",), priority=50)
    options = MappingProxyType(
        {"points": Option(None, optional(check_count)), "flip_pairs": Option((), check_pairs)}
    )
    flags = MappingProxyType(
        {
            "flip_pairs": Flag(
                "flip_pairs", "Keypoints: JSON [[a, b], ...] swapped by a flip.", json=True
            )
        }
    )
    hint = "on the command line: --flip-pairs '[[a, b], ...]' or --fields"

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """Flip pairs name existing points."""
        points = opts["points"]
        worst = max((max(p) for p in opts["flip_pairs"]), default=-1)
        if points is not None and worst >= points:
            raise SpecError(
                f"fields.{field}.flip_pairs names point {worst}; there are "
                f"{points} points (0..{points - 1})"
            )

    def describe(self, opts: Mapping[str, Any], size: Size) -> str:
        """``keypoints 17 points`` (``with flip pairs`` when it records them)."""
        pairs = " with flip pairs" if opts["flip_pairs"] else ""
        return f"keypoints {opts['points']} points{pairs}"

    def flip_warning(self, field: str, opts: Mapping[str, Any]) -> str | None:
        """A flip without ``flip_pairs`` swaps the meaning of left and right landmarks."""
        if opts["flip_pairs"]:
            return None
        return (
            f"field {field!r} (keypoints) has no flip pairs, and the augment flips: a flipped "
            "sample's points are mirrored but keep their indices, so a left landmark lies "
            "where the right one should (the left eye on the right); build the store with "
            "--flip-pairs '[[a, b], ...]' naming the left/right pairs, or pass flip=None "
            "(TrainAugment(..., flip=None)); points without sides (a centre line) need no pair"
        )

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
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

    def placed(
        self, key: str, value: np.ndarray, stored: np.ndarray, frame: tuple[int, int]
    ) -> None:
        """Note a sample whose visible keypoints were made invisible (:mod:`precompute.notes`).

        Outside the source frame is likely an annotation of another image size or
        orientation; inside it but lost, the build's ``center-crop`` cut them off.
        """
        w, h = frame
        shown = value[:, 2] > 0
        x, y = value[:, 0], value[:, 1]
        outside = shown & ~((x >= 0) & (x < w) & (y >= 0) & (y < h))
        if outside.any():
            note("keypoints_outside", key)
        if (shown & ~outside & (stored[:, 2] == 0)).any():
            note("keypoints_cropped", key)


def place_keypoints(points: np.ndarray, p: Placement, pad: Any = 0.0) -> np.ndarray:
    """Map ``(P, 3)`` keypoints exactly into the stored frame; points left out get ``v = 0``."""
    left, top, right, bottom = p.box
    x = (points[:, 0].astype(np.float64) - left) * (p.out[0] / (right - left)) + p.offset[0]
    y = (points[:, 1].astype(np.float64) - top) * (p.out[1] / (bottom - top)) + p.offset[1]
    t, lf, h, w = p.extent
    inside = (x >= lf) & (x < lf + w) & (y >= t) & (y < t + h)
    v = np.where(inside, points[:, 2], 0.0)
    return np.stack([x, y, v], axis=1).astype(np.float32)


if not has_kind("keypoints"):
    register_kind(KeypointsKind())
if "affine" not in PLACE:
    register_rule("affine", place_keypoints)
