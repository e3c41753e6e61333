"""Checks shared by the array readers: size before reading, one name of several, finiteness."""

from __future__ import annotations

from typing import Any

import numpy as np

from precompute.errors import DecodeError

__all__ = ["check_finite", "guard_size", "pick_one"]


def guard_size(key: str, what: str, shape: tuple[int, ...], dtype: Any, max_bytes: int) -> None:
    """Refuse ``what`` of ``shape`` x ``dtype`` if it holds more than ``max_bytes``."""
    size = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    if size > max_bytes:
        raise DecodeError(
            key,
            f"{what} of shape {list(shape)} {np.dtype(dtype).name} is {size} bytes, "
            f"over the limit of {max_bytes} bytes",
        )


def check_finite(key: str, value: np.ndarray) -> np.ndarray:
    """Return ``value``; refuse NaN/inf, naming their count and the first one's index."""
    if not np.issubdtype(value.dtype, np.inexact):
        return value
    bad = ~np.isfinite(value)
    if bad.any():
        first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), value.shape))
        raise DecodeError(
            key,
            f"{int(bad.sum())} NaN/inf value(s), the first at index {list(first)}; "
            "replace them (or allow non-finite values)",
        )
    return value


def pick_one(key: str, names: list[str], array_key: str | None, what: str) -> str:
    """The one name to read: ``array_key``, or the only one; else an error listing them."""
    if not names:
        raise DecodeError(key, f"holds no {what}")
    if array_key is None and len(names) == 1:
        return names[0]
    if array_key is None:
        raise DecodeError(key, f"holds {len(names)} {what}s {names}; name one with --key")
    if array_key not in names:
        raise DecodeError(key, f"has no {what} {array_key!r}; it holds {names}")
    return array_key
