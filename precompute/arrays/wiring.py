"""Register the ``array`` kind's backends: the decoder and the build geometry rule ``array``.

Importing this module adds :func:`~precompute.arrays.scenesrc.decode_patch` (array files, and
patches of a scene) to the build's decoders (``precompute.fields.assemble.register_decoder``) and
:func:`~precompute.arrays.resample.place_array` to its geometry rules
(``precompute.fields.geometry.register_rule``), once per process. The build imports it
(:mod:`precompute.buildsource`); Ray workers get both from the job's ``Backends``.
"""

from __future__ import annotations

from precompute.arrays.resample import place_array
from precompute.arrays.scenesrc import decode_patch
from precompute.fields.assemble import DECODE, register_decoder
from precompute.fields.geometry import PLACE, register_rule

__all__ = ["register_array_backends"]


def register_array_backends() -> None:
    """Register the decoder and the build rule named ``array`` if this process lacks them."""
    if "array" not in DECODE:
        register_decoder("array", decode_patch)
    if "array" not in PLACE:
        register_rule("array", place_array)


register_array_backends()
