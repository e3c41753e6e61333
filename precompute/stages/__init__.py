"""Per-sample transforms of a build, one per module, used by the field kinds' build rules.

:mod:`~precompute.stages.decode` (bytes -> RGB, the documented decoding rules),
:mod:`~precompute.stages.resize` (the build modes), :mod:`~precompute.stages.augment` (the
offline variants' crop and colour jitter). The one build pipeline
(:mod:`precompute.pipeline.fieldwork`, :func:`precompute.fields.assemble.assemble`) calls them.
"""
