"""The box sampler's old import path: it lives in :mod:`precompute.boxes` (the foundation)."""

from precompute.boxes import (
    KEY_MAX,
    Draw,
    as_extents,
    center_boxes,
    draw,
    draw_key,
    generator,
    random_boxes,
)

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
