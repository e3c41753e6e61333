"""The user's own preprocessing, run in the build and keyed in the cache (``docs/transforms.md``).

:mod:`~precompute.transforms.spec` holds a transform in the build spec (name, arguments, where
it runs, the fingerprint of its code), :mod:`~precompute.transforms.fingerprint` imports it and
fingerprints its code, :mod:`~precompute.transforms.apply` runs it on a sample and checks what
it returns, :mod:`~precompute.transforms.onray` brings it to a Ray build's workers and checks
that each imports the same code before any shard runs.
"""

from precompute.transforms.spec import AT, TransformSpec

__all__ = ["AT", "TransformSpec"]
