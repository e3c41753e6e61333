"""The one crop sampler: random resized crops, flips and jitter factors for every backend.

The offline variants, the torch ops and the DALI loaders all call it, so for the same key
and the same extents they crop, flip and jitter identically; each backend keeps only its pixel
kernel. It has two halves:

* :func:`draw` (host, numpy) makes every random number of ``n`` samples from one
  ``rng.random((n, 2 * attempts + 6))`` call: per sample, ``attempts`` area fractions,
  ``attempts`` aspect ratios, two uniforms placing the box, one for the flip and three for
  the colour factors. Row ``i`` does not depend on ``n``, so a short last batch draws what
  the first rows of a full one would.
* :func:`random_boxes` (pure arithmetic on numpy arrays or torch tensors, passed as ``xp``)
  places the boxes inside each sample's valid extent, torchvision's RandomResizedCrop rule:
  the first candidate that fits wins, else the centred extent with its ratio clamped. It
  needs no host data, so the torch path runs it on the device without a host sync. It works
  in float64, whose sqrt, divide and round are exact IEEE operations on every device, so the
  boxes are bit-identical wherever they are computed.

:func:`generator` turns an integer key into the numpy generator; :func:`draw_key` derives
one from several integers (e.g. seed, slot, variant). Randomness is a pure function of the
key: no global RNG.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from precompute.policy import Policy

__all__ = [
    "KEY_MAX",
    "Draw",
    "as_extents",
    "center_boxes",
    "draw",
    "draw_key",
    "generator",
    "random_boxes",
]

KEY_MAX = 2**63 - 1  # derived keys fit a signed 64-bit integer (any torch seed API takes them)


class Draw(NamedTuple):
    """The random numbers of ``n`` samples (numpy on the host, or moved as tensors).

    Attributes:
        area: ``(n, attempts)`` float64 crop area / extent area of each candidate.
        ratio: ``(n, attempts)`` float64 crop width / height of each candidate.
        shift: ``(n, 2)`` float64 uniforms placing the box (top, left) in the free room.
        flip: ``(n,)`` bool, mirror left-right.
        factors: ``(n, 3)`` float32 brightness, contrast, saturation factors.
    """

    area: Any
    ratio: Any
    shift: Any
    flip: Any
    factors: Any


def generator(key: int) -> np.random.Generator:
    """Return the numpy generator of one draw (PCG64 seeded by ``key``).

    Any ``torch.Generator`` seed is a valid key: an integer in ``[0, 2**64 - 1]``.
    """
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 2**64:
        raise ValueError(f"a draw key must be an integer in [0, 2**64 - 1], got {key!r}")
    return np.random.default_rng(key)


def draw_key(*parts: int) -> int:
    """Return a 63-bit key derived from non-negative integers (a pure function)."""
    return int(np.random.default_rng(list(parts)).integers(0, KEY_MAX))


def draw(rng: np.random.Generator, n: int, policy: Policy) -> Draw:
    """Draw the crop candidates, box placement, flips and colour factors of ``n`` samples."""
    t = policy.attempts
    u = rng.random((n, 2 * t + 6))
    lo, hi = policy.scale
    log_lo, log_hi = math.log(policy.ratio[0]), math.log(policy.ratio[1])
    strength = np.asarray(policy.jitter, dtype=np.float64)
    return Draw(
        area=lo + (hi - lo) * u[:, :t],
        ratio=np.exp(log_lo + (log_hi - log_lo) * u[:, t : 2 * t]),
        shift=u[:, 2 * t : 2 * t + 2],
        flip=u[:, 2 * t + 2] < policy.flip,
        factors=(1.0 + strength * (2.0 * u[:, 2 * t + 3 :] - 1.0)).astype(np.float32),
    )


def _split(extents: Any) -> tuple[Any, Any, Any, Any]:
    """``(top, left, height, width)`` columns; empty extents count as one pixel."""
    return extents[:, 0], extents[:, 1], extents[:, 2].clip(1, None), extents[:, 3].clip(1, None)


def _fallback(eh: Any, ew: Any, ratio: tuple[float, float], xp: Any) -> tuple[Any, Any]:
    """The whole extent with its aspect ratio clamped into ``ratio`` (torchvision's rule)."""
    r = ew / eh
    h = xp.where(r < ratio[0], xp.round(ew / ratio[0]), eh)
    w = xp.where(r > ratio[1], xp.round(eh * ratio[1]), ew)
    return xp.minimum(h.clip(1, None), eh), xp.minimum(w.clip(1, None), ew)


def random_boxes(extents: Any, d: Draw, ratio: tuple[float, float], xp: Any = np) -> Any:
    """Place random resized crops inside each sample's valid extent.

    Args:
        extents: ``(n, 4)`` float64 ``(top, left, height, width)`` of the valid pixels.
        d: The draw of these ``n`` samples (arrays of the same kind and device as extents).
        ratio: The policy's aspect-ratio range (for the fallback).
        xp: ``numpy`` or ``torch``: the module whose ``round``, ``sqrt``, ``floor``,
            ``where``, ``minimum`` and ``stack`` the arithmetic uses.

    Returns:
        ``(n, 4)`` float64 whole-pixel boxes ``(top, left, height, width)`` inside the extents.
    """
    top, left, eh, ew = _split(extents)
    area = (eh * ew)[:, None] * d.area
    w = xp.round(xp.sqrt(area * d.ratio))
    h = xp.round(xp.sqrt(area / d.ratio))
    ok = (w >= 1) & (h >= 1) & (w <= ew[:, None]) & (h <= eh[:, None])
    first = ok & (ok.cumsum(1) == 1)  # the first candidate that fits
    found = ok.any(1)
    fh, fw = _fallback(eh, ew, ratio, xp)
    h = xp.where(found, (h * first).sum(1), fh)
    w = xp.where(found, (w * first).sum(1), fw)
    dy = xp.where(found, xp.floor(d.shift[:, 0] * (eh - h + 1)), xp.floor((eh - h) / 2))
    dx = xp.where(found, xp.floor(d.shift[:, 1] * (ew - w + 1)), xp.floor((ew - w) / 2))
    return xp.stack([top + dy, left + dx, h, w], 1)


def center_boxes(extents: Any, size: tuple[int, int], fraction: float, xp: Any = np) -> Any:
    """Deterministic eval boxes: the centred box of output shape ``size`` in each extent.

    The box's short side is ``fraction`` of the extent's short side (resize the short side
    to ``min(size) / fraction``, crop ``size`` from the centre), in whole pixels, clamped to
    the extent. Same arguments as :func:`random_boxes`; returns the same kind of boxes.
    """
    top, left, eh, ew = _split(extents)
    side = fraction * xp.minimum(eh, ew)
    short = min(size)
    h = xp.minimum(xp.round(side * (size[0] / short)).clip(1, None), eh)
    w = xp.minimum(xp.round(side * (size[1] / short)).clip(1, None), ew)
    return xp.stack([top + xp.floor((eh - h) / 2), left + xp.floor((ew - w) / 2), h, w], 1)


def as_extents(hw: npt.ArrayLike, offset: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
    """Return ``(n, 4)`` float64 extents from ``(n, 2)`` sizes and optional top-left offsets."""
    size = np.asarray(hw, dtype=np.float64).reshape(-1, 2)
    start = np.zeros_like(size) if offset is None else np.asarray(offset, np.float64)
    return np.concatenate([start.reshape(-1, 2), size], axis=1)
