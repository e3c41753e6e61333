"""The ``position`` kind's old import path: it lives in :mod:`precompute.kinds.position`."""

from precompute.kinds.position import PositionKind

__all__ = ["PositionKind"]
