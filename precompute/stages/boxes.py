"""The box sampler's old import path: it lives in :mod:`precompute.boxes` (the foundation).

Every public name of :mod:`precompute.boxes` is re-exported here, so the old path keeps
working without a second list of them.
"""

from precompute import boxes as _boxes
from precompute.boxes import *  # noqa: F403 (the old path: every public name)

__all__ = list(_boxes.__all__)
