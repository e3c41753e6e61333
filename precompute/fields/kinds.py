"""The kinds' old import path: the registry and the built-in kind classes.

The registry (:data:`KINDS`, :func:`register_kind`, :func:`kind_of`) lives in
:mod:`precompute.fields.registry` (also ``precompute.fields.KINDS``); each built-in kind is one
module of :mod:`precompute.kinds` that holds everything about it (``docs/kinds.md``): what it
decides (source, storage, validation, build and loader geometry, mixing, verification, its
source reader and flags) is declared there, never tested by name elsewhere.
"""

from __future__ import annotations

from precompute.fields.base import Kind, Storage
from precompute.fields.registry import _KINDS as _KINDS  # tests remove the kinds they add
from precompute.fields.registry import KINDS, kind_of, register_kind
from precompute.kinds.array import ArrayKind
from precompute.kinds.image import ImageKind
from precompute.kinds.keypoints import KeypointsKind
from precompute.kinds.label import LabelKind
from precompute.kinds.labels import LabelsKind
from precompute.kinds.mask import MaskKind
from precompute.kinds.position import PositionKind

__all__ = [
    "KINDS",
    "ArrayKind",
    "ImageKind",
    "KeypointsKind",
    "Kind",
    "LabelKind",
    "LabelsKind",
    "MaskKind",
    "PositionKind",
    "Storage",
    "kind_of",
    "register_kind",
]
