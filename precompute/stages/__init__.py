"""Per-sample transforms of a build, one per module, chained by :func:`make_pipeline`."""

from __future__ import annotations

from typing import Any

import numpy as np

from precompute.spec import AugmentPolicy, BuildSpec
from precompute.stages.augment import Augment
from precompute.stages.base import Port, SampleContext, Stage, check_chain
from precompute.stages.decode import Decode
from precompute.stages.resize import Resize

__all__ = ["Pipeline", "Port", "SampleContext", "Stage", "check_chain", "make_pipeline"]


class Pipeline:
    """A validated chain of stages: encoded bytes -> (pixels, extent) in the store's shape."""

    def __init__(self, stages: list[Stage], output: Port) -> None:
        check_chain(stages, output)
        self.stages = stages
        self.output = output

    def __call__(self, data: bytes, ctx: SampleContext) -> tuple[np.ndarray, np.ndarray]:
        """Run one sample through every stage."""
        value: Any = data
        for stage in self.stages:
            value = stage(value, ctx)
        return value  # type: ignore[no-any-return]


def make_pipeline(spec: BuildSpec) -> Pipeline:
    """Return the pipeline of ``spec``: decode, then resize (K = 1) or augment (K > 1)."""
    s = spec.size
    if spec.variants == 1:
        tail: Stage = Resize(s, spec.mode, spec.fill)
        output = Port("pixels", (s, s, 3), "uint8")
    else:
        tail = Augment(s, spec.variants, spec.augment or AugmentPolicy())
        output = Port("pixels", (spec.variants, s, s, 3), "uint8")
    return Pipeline([Decode(spec.max_pixels), tail], output)
