"""Errors of :mod:`loaders.augment`, part of the :mod:`loaders` error hierarchy."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from loaders.errors import LoaderError

__all__ = ["AugmentError", "refuse_unknown"]


class AugmentError(LoaderError, ValueError):
    """A bad augmentation parameter, policy dict or input tensor; the message names it."""


def refuse_unknown(cls: Any, data: Mapping[str, Any], what: str) -> None:
    """Refuse keys of a policy dict that are no field of the dataclass ``cls``.

    Raises:
        AugmentError: ``WHAT: unknown field(s) [...]; known: [...]``.
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise AugmentError(f"{what}: unknown field(s) {unknown}; known: {sorted(known)}")
