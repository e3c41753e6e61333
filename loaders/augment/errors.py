"""Errors of :mod:`loaders.augment`, part of the :mod:`loaders` error hierarchy."""

from __future__ import annotations

from loaders.errors import LoaderError

__all__ = ["AugmentError"]


class AugmentError(LoaderError, ValueError):
    """A bad augmentation parameter, policy dict or input tensor; the message names it."""
