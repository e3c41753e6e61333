"""Checks and parsers of field values; each raises ``ValueError`` saying what is wrong.

The kinds (:mod:`precompute.fields.kinds`) call these and add the input key and the field
name to the message. Parsers of manifest cells return hashable values (tuples); checks
return the numpy array that is stored.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from precompute.policy import show

__all__ = [
    "class_ids",
    "class_index",
    "exact_array",
    "index_list",
    "keypoints",
    "parse_label",
    "parse_label_list",
    "parse_points",
    "pixels",
    "whole_label_text",
]

_INT = re.compile(r"-?[0-9]+", re.ASCII)
# Text that reads as a number (1.0, 0.5, +3, 1e3): a label of such text is refused, not taken
# as a class name, whose sorted order would then differ from the numbers' (10.0 before 2.0).
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)
_SHOWN = 5  # offending values named in a message


def _array(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def pixels(value: Any, channels: int) -> np.ndarray:
    """An ``(H, W, channels)`` uint8 image (``(H, W)`` counts as one channel)."""
    a = _array(value)
    if a.ndim == 2 and channels == 1:
        a = a[..., None]
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != channels or 0 in a.shape:
        raise ValueError(f"expected (H, W, {channels}) uint8 pixels, got {a.shape} {a.dtype}")
    return a


def class_ids(value: Any, classes: int, ignore: int, dtype: str) -> np.ndarray:
    """An ``(H, W)`` integer mask whose values are class ids below ``classes`` or ``ignore``."""
    a = _array(value)
    if a.ndim != 2 or 0 in a.shape or not (a.dtype.kind in "iu" or a.dtype == np.bool_):
        raise ValueError(f"expected an (H, W) integer mask, got {a.shape} {a.dtype}")
    found = np.unique(a)
    bad = found[((found < 0) | (found >= classes)) & (found != ignore)]
    if bad.size:
        shown = ", ".join(str(int(v)) for v in bad[:_SHOWN]) + (
            ", ..." if bad.size > _SHOWN else ""
        )
        raise ValueError(
            f"mask values [{shown}] are outside the classes 0..{classes - 1} "
            f"(ignore_index {ignore})"
        )
    return a.astype(dtype)


def keypoints(value: Any, points: int | None) -> np.ndarray:
    """A ``(P, 3)`` float32 array: finite ``x, y``, visibility 0, 1 or 2, P = ``points``."""
    a = np.asarray(value, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3:
        raise ValueError(f"expected (P, 3) keypoints (x, y, visible), got shape {a.shape}")
    if points is not None and a.shape[0] != points:
        raise ValueError(f"{a.shape[0]} keypoints, the field has {points}")
    if not np.isfinite(a).all():
        raise ValueError("a keypoint coordinate is not finite")
    if not np.isin(a[:, 2], (0.0, 1.0, 2.0)).all():
        raise ValueError(f"visibility must be 0, 1 or 2, got {show(a[:, 2].tolist())}")
    return a.astype(np.float32)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"a keypoint coordinate must be a finite number, got {show(value)}")
    return float(value)


def _json(raw: Any, what: str) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"{what} is not JSON: {show(raw)}") from None


def parse_points(raw: Any) -> tuple[tuple[float, float, float], ...]:
    """Keypoints from a JSON list (or its text) of ``[x, y]`` or ``[x, y, v]`` (v default 1)."""
    doc = _json(raw, "keypoints")
    if not isinstance(doc, list) or not doc:
        raise ValueError(
            f"keypoints must be a non-empty list of [x, y] or [x, y, v], got {show(doc)}"
        )
    out = []
    for point in doc:
        if not isinstance(point, list) or len(point) not in (2, 3):
            raise ValueError(f"a keypoint must be [x, y] or [x, y, v], got {show(point)}")
        x, y = _number(point[0]), _number(point[1])
        v = _number(point[2]) if len(point) == 3 else 1.0
        if v not in (0.0, 1.0, 2.0):
            raise ValueError(f"keypoint visibility must be 0, 1 or 2, got {show(point[2])}")
        out.append((x, y, v))
    return tuple(out)


def whole_label_text(text: str) -> bool:
    """Whether label ``text`` (stripped, non-empty) is an integer: ASCII digits, optional ``-``.

    Raises:
        ValueError: ``text`` is another number (``1.0``, ``0.5``, ``+3``, ``1e3``): neither an
            integer as written nor a class name (pandas writes an integer column holding a
            missing value as ``1.0``).
    """
    if _INT.fullmatch(text):
        return True
    if _NUMBER.fullmatch(text):
        raise ValueError(
            f"label {show(text)} is a number but not an integer: labels are integers "
            "(0, 1, 2, ...) or class names; write 1, not 1.0 (pandas: .astype(int))"
        )
    return False


def parse_label(raw: Any) -> int | str:
    """An integer label (a JSON integer or ASCII digits) or a non-empty class name.

    Raises:
        ValueError: Not an integer nor text, empty, or number text that is not an integer.
    """
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise ValueError(f"a label must be an integer or a class name, got {show(raw)}")
    if isinstance(raw, int):
        return raw
    text = raw.strip()
    if not text:
        raise ValueError("empty label")
    return int(text) if whole_label_text(text) else text


def parse_label_list(raw: Any) -> tuple[int | str, ...]:
    """Labels from a JSON list (or its text) of integers or class names (may be empty)."""
    doc = _json(raw, "labels")
    if not isinstance(doc, list):
        raise ValueError(f"labels must be a JSON list, got {show(doc)}")
    return tuple(parse_label(item) for item in doc)


def class_index(value: Any, top: int) -> int:
    """An integer in ``[0, top)``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"a label must be an integer class index, got {show(value)}")
    if not 0 <= int(value) < top:
        raise ValueError(f"label {int(value)} is outside the classes 0..{top - 1}")
    return int(value)


def index_list(value: Any, classes: int) -> list[int]:
    """Distinct class indices in ``[0, classes)``."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"labels must be a list of class indices, got {show(value)}")
    out = [class_index(v, classes) for v in value]
    if len(set(out)) != len(out):
        raise ValueError(f"labels {show(out)} repeat a class")
    return out


def exact_array(value: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An array of exactly ``shape``, cast to ``dtype`` only within its family, exactly.

    A narrower integer into a wider one (int16 into int32) or a narrower float into a wider
    one is cast (exact, same scale); an integer into a float is refused even where the cast
    would be exact (uint8 into float32): files of one dataset with integer and float values
    usually hold them on different scales (0-255 counts beside 0-1 reflectance), which a cast
    would mix silently.
    """
    a = _array(value)
    if a.shape != shape:
        raise ValueError(f"expected shape {list(shape)}, got {list(a.shape)}")
    want = np.dtype(dtype)
    family = {"i": "int", "u": "int", "f": "float", "b": "bool"}
    same = family.get(a.dtype.kind, a.dtype.kind) == family.get(want.kind, want.kind)
    if not (same and np.can_cast(a.dtype, want, casting="safe")):
        raise ValueError(
            f"dtype {a.dtype} does not fit the field's {dtype} (the first file's or the "
            "declared one): only a narrower integer into a wider integer, or a narrower float "
            "into a wider float, is cast (never narrowed, never integer and float mixed: they "
            "often hold other scales); convert the files to one dtype, or declare the widest"
        )
    return a.astype(want, copy=False)
