"""The ``position`` kind: a scene patch's ``(row, col)``, and the scene that is cut into patches.

A store built from a scene and its ground truth (``docs/arrays.md``, "A scene and its ground
truth") has one sample per labelled pixel: field ``image`` (a spatial ``array``, the ``P x P x
C`` patch), ``label`` (class - 1) and ``position``, this kind: the centre pixel's ``(row,
col)`` in the scene, ``(2,)`` int32 per sample (holes ``-1``), never moved by geometry.

Its options are the recipe of the source, so the stored spec (and its hash) say exactly which
patches a store holds: ``labels`` (the ground truth file, relative to the scene's folder or
absolute), ``labels_key`` (its ``.npz``/``.mat`` name), ``patch`` (``P``), and the optional
block split ``split_block``, ``test_fraction``, ``split_seed``, ``split_guard`` with ``split``
(``train`` or ``test``: the side this build stores). Each has its flag (``--labels``,
``--patch``, ...). This module's source reader reads the scene
(:mod:`precompute.arrays.scenesrc`) when those flags are given or a spec has this kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.arrays.scenesrc import infer_scene_fields, list_scene
from precompute.checks import Size
from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.fields.base import Kind, Storage
from precompute.fields.options import REQUIRED, Flag, Option, integer, one_of, optional
from precompute.fields.registry import has_kind, register_kind
from precompute.kinds.hooks import SOURCE_READERS, SourceQuery, SourceReader, register_source
from precompute.policy import show
from precompute.sources.fields import FieldSource

__all__ = ["PositionKind", "is_scene_fields"]


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where} must be a non-empty string, got {show(value)}")
    return value


def _fraction(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise SpecError(f"{where} must be a number in [0, 1), got {show(value)}")
    return float(value)


class PositionKind(Kind):
    """``(2,)`` int32 ``(row, col)`` of a patch's centre in its scene (inline, untouched)."""

    name = "position"
    source = "inline"
    options = MappingProxyType(
        {
            "labels": Option(REQUIRED, _text),
            "labels_key": Option(None, optional(_text)),
            "patch": Option(REQUIRED, integer(1, 1024)),
            "split_block": Option(None, optional(integer(1, 1 << 20))),
            "test_fraction": Option(0.2, _fraction),
            "split_seed": Option(0, integer(0, 2**63 - 1)),
            "split_guard": Option(0, integer(0, 1 << 20)),
            "split": Option(None, optional(one_of("train", "test"))),
        }
    )
    flags = MappingProxyType(
        {
            "labels": Flag("labels", "Scene SRC: its ground truth file (0 = unlabelled)."),
            "labels_key": Flag(
                "labels_key", "Scene: the .npz member or .mat variable of --labels."
            ),
            "patch": Flag("patch", "Scene: patch side P (default --size P).", int),
            "split_block": Flag("split_block", "Scene: block side of the train/test split.", int),
            "test_fraction": Flag("test_fraction", "Scene split: test share (default 0.2).", float),
            "split_seed": Flag("split_seed", "Scene split: seed of the block order.", int),
            "split_guard": Flag(
                "split_guard", "Scene split: train pixels left out near test.", int
            ),
            "split": Flag("split", "Scene split: train | test, the side this build stores."),
        }
    )
    hint = "a scene build: --labels GT --patch P"

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """``split`` and ``split_block`` go together."""
        if (opts["split"] is None) != (opts["split_block"] is None):
            raise SpecError(
                f"fields.{field}: a block split needs both split_block (--split-block) and "
                f"split (--split train|test), got {opts['split_block']!r} and {opts['split']!r}"
            )

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``(2,)`` int32, holes ``-1``."""
        return Storage((2,), "int32", -1)

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """Two integers ``>= 0``."""
        arr = np.asarray(value)
        if arr.shape != (2,) or arr.dtype.kind not in "iu" or (arr < 0).any():
            raise ValueError(f"a position is two integers >= 0 (row, col), got {show(value)}")
        return arr.astype(np.int32)

    def parse_inline(self, raw: Any) -> Any:
        """``[row, col]`` as a tuple."""
        return tuple(raw) if isinstance(raw, (list, tuple)) else raw

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Every valid position is ``>= 0``."""
        if (stored < 0).any():
            raise ValueError("a stored position is negative")

    def spec_defaults(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``--patch P`` without ``--size``: the patches are stored as cut (``size`` P)."""
        patch = given.get("patch")
        return {"size": patch} if isinstance(patch, int) else {}


def is_scene_fields(fields: Sequence[FieldSpec]) -> bool:
    """Whether ``fields`` are a scene's: a ``position`` field holds the recipe."""
    return any(isinstance(f.spec, PositionKind) for f in fields)


def _accepts(q: SourceQuery) -> bool:
    """The scene flags given (inferring), or a spec with a position field (listing)."""
    return "position" in q.options or is_scene_fields(q.fields)


def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
    return infer_scene_fields(q.src, q.options)


def _list(q: SourceQuery) -> FieldSource:
    return list_scene(q.src, q.fields)


if not has_kind("position"):
    register_kind(PositionKind())
if "scene" not in SOURCE_READERS:
    register_source(SourceReader("scene", _accepts, _infer, _list))
