"""Fixed-length clips of a decoded wave: pad or centre-crop, consecutive windows, segments.

Waves are ``(C, n)`` arrays (any dtype) at the store's sample rate. A clip is always exactly
``length`` frames, zero-padded at the end, with its **valid length** (the frames that came from
the file) beside it: the ``length`` companion of an ``audio`` field.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from precompute.errors import DecodeError, SpecError

__all__ = ["CROPS", "LAST", "Window", "fit_clip", "segment", "windows"]

CROPS = ("center", "start")  # where a longer wave is cut
LAST = ("pad", "drop")  # what happens to the last, partial window


class Window(NamedTuple):
    """One window of a long wave: the clip, its valid length, its start in seconds."""

    clip: np.ndarray
    valid: int
    start_seconds: float


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name} must be a positive integer, got {value!r}")
    return value


def _padded(part: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros((part.shape[0], length), dtype=part.dtype)
    out[:, : part.shape[1]] = part
    return out


def fit_clip(wave: np.ndarray, length: int, mode: str = "center") -> tuple[np.ndarray, int]:
    """Return ``(clip, valid)``: ``wave`` ``(C, n)`` made exactly ``length`` frames long.

    A shorter wave is zero-padded at the end (``valid = n``); a longer one is cut to
    ``length`` frames (``valid = length``): its middle (``mode="center"``, the start is
    ``(n - length) // 2``) or its beginning (``mode="start"``).

    Raises:
        SpecError: A bad ``length`` or ``mode``.
        ValueError: A wave that is not 2-D.
    """
    _positive("length", length)
    if mode not in CROPS:
        raise SpecError(f"mode must be one of {list(CROPS)}, got {mode!r}")
    if wave.ndim != 2:
        raise ValueError(f"wave must be (channels, frames), got shape {wave.shape}")
    n = wave.shape[1]
    if n <= length:
        return _padded(wave, length), n
    start = (n - length) // 2 if mode == "center" else 0
    return np.ascontiguousarray(wave[:, start : start + length]), length


def windows(
    wave: np.ndarray, length: int, hop: int, sample_rate: int, last: str = "pad"
) -> list[Window]:
    """Cut ``wave`` ``(C, n)`` into windows of ``length`` frames starting every ``hop``.

    Windows start at ``0, hop, 2 * hop, ...``. Every full window is kept. The first window
    that runs past the end (if it starts inside the wave) is the **last, partial** window:
    zero-padded with its valid length (``last="pad"``, the default: no audio is lost), or
    left out (``last="drop"``) unless it is the only window (a wave shorter than ``length``
    always gives one padded window, as :func:`fit_clip` does). No window follows one that
    reaches the end. With ``hop > length`` the frames between windows are skipped.

    Raises:
        SpecError: A bad ``length``, ``hop``, rate or ``last``.
        ValueError: A wave that is not 2-D.
    """
    _positive("length", length)
    _positive("hop", hop)
    _positive("sample_rate", sample_rate)
    if last not in LAST:
        raise SpecError(f"last must be one of {list(LAST)}, got {last!r}")
    if wave.ndim != 2:
        raise ValueError(f"wave must be (channels, frames), got shape {wave.shape}")
    n = wave.shape[1]
    out: list[Window] = []
    for start in range(0, max(n, 1), hop):
        part = wave[:, start : start + length]
        full = part.shape[1] == length
        if full or last == "pad" or not out:
            out.append(Window(_padded(part, length), part.shape[1], start / sample_rate))
        if not full or start + length >= n:
            break
    return out


def segment(
    frames: int, sample_rate: int, start: float | None, end: float | None, key: str
) -> slice:
    """The frames of a manifest segment ``[start, end)`` seconds in a wave of ``frames``.

    ``start`` None is 0, ``end`` None is the end of the file. Seconds are rounded to the
    nearest frame; an ``end`` at most half a frame past the end of the file is the end.

    Raises:
        DecodeError: Naming ``key``: a bound that is not a finite number, ``start < 0``,
            ``end <= start``, a start at or after the end of the file, or an end past it.
    """
    _positive("sample_rate", sample_rate)
    duration = frames / sample_rate
    lo = 0.0 if start is None else start
    hi = duration if end is None else end
    where = f"segment start={start!r} end={end!r}"
    for name, value in (("start", lo), ("end", hi)):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise DecodeError(key, f"{where}: {name} must be a finite number of seconds")
    a, b = round(lo * sample_rate), round(hi * sample_rate)
    outside = f"{where} s lies outside the file ({duration:.3f} s, {frames} frames)"
    if lo < 0:
        raise DecodeError(key, f"{where}: needs 0 <= start < end (seconds)")
    if a >= frames:
        raise DecodeError(key, outside)
    if hi <= lo:
        raise DecodeError(key, f"{where}: needs 0 <= start < end (seconds)")
    if b > frames:
        raise DecodeError(key, outside)
    return slice(a, max(b, a + 1))
