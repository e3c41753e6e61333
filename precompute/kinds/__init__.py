"""The kinds layer: the open tables a kind module fills (:mod:`~precompute.kinds.hooks`).

A kind is one module that registers everything about it when imported (``docs/kinds.md``).
"""
