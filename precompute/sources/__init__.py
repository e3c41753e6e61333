"""What a build reads: class folders, manifests, sources of fields, inputs, fingerprints.

:mod:`~precompute.sources.classes` (class folders and ``path,label`` manifests: ``Source``,
``list_source``), :mod:`~precompute.sources.fields` (sources of named fields, ``ClassSource``),
:mod:`~precompute.sources.resolve` (which source a build reads, with which fields),
:mod:`~precompute.sources.folders`, :mod:`~precompute.sources.manifests`,
:mod:`~precompute.sources.rows`, :mod:`~precompute.sources.listing`,
:mod:`~precompute.sources.inputs` (safe reads), :mod:`~precompute.sources.digests`
(fingerprints). The names of :mod:`~precompute.sources.classes` are importable from here too.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """The names of :mod:`precompute.sources.classes` (imported when first asked for)."""
    from precompute.sources import classes

    try:
        return getattr(classes, name)
    except AttributeError:
        raise AttributeError(f"module 'precompute.sources' has no attribute {name!r}") from None
