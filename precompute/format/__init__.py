"""The store format: its layout, the array table, the one shard codec, checks, summary, verify.

:mod:`~precompute.format.layout` (names, geometry, :func:`open_store_info`),
:mod:`~precompute.format.arrays` (the array table), :mod:`~precompute.format.shardcodec` (the
shard files, byte for byte what zarr-python writes), :mod:`~precompute.format.storecheck`
(what a complete store holds), :mod:`~precompute.format.summary` (``precompute inspect``),
:mod:`~precompute.format.verify` (``precompute verify``). The names of
:mod:`~precompute.format.layout` are importable from here too (``from precompute.format import
open_store_info``), as before the format had modules of its own.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """The names of :mod:`precompute.format.layout` (imported when first asked for)."""
    from precompute.format import layout

    try:
        return getattr(layout, name)
    except AttributeError:
        raise AttributeError(f"module 'precompute.format' has no attribute {name!r}") from None
