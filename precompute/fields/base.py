"""The base of field kinds: what a kind declares and the hooks it implements.

The registry of the built-in kinds and the rules they declare is :mod:`precompute.fields.kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from precompute.errors import DecodeError, SpecError
from precompute.fields.options import REQUIRED, Option

__all__ = ["Kind", "Storage"]


@dataclass(frozen=True)
class Storage:
    """How one sample of a field is stored: shape (without the sample axis), dtype, hole value."""

    shape: tuple[int, ...]
    dtype: str
    fill: int | float


class Kind:
    """A field kind: class attributes declare the rules, methods check and shape values."""

    name: ClassVar[str]
    source: ClassVar[str]  # "file" or "inline"
    decoder: ClassVar[str] = "inline"  # how a file field's bytes are decoded (assemble.DECODE)
    spatial: ClassVar[bool] = False  # lives in the image frame: one placement, one draw
    resample: ClassVar[str] = "none"  # build geometry rule
    augment: ClassVar[str] = "none"  # loader geometry rule
    photometric: ClassVar[bool] = False
    mixup: ClassVar[str] = "refuse"
    cutmix: ClassVar[str] = "refuse"
    class_names: ClassVar[bool] = False  # inline values may be class names
    options: ClassVar[Mapping[str, Option]] = MappingProxyType({})

    def normalize(self, field: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """Return every option of ``field`` checked, defaults filled in.

        Raises:
            SpecError: An unknown or invalid option, or a required one missing.
        """
        unknown = sorted(set(map(str, given)) - set(self.options))
        if unknown:
            known = sorted(self.options)
            raise SpecError(
                f"fields.{field}: unknown option(s) {unknown} of kind {self.name!r}; known: {known}"
            )
        out = {}
        for key, opt in self.options.items():
            value = given.get(key, opt.default)
            if value is REQUIRED:
                raise SpecError(f"fields.{field}.{key} is required for kind {self.name!r}")
            out[key] = opt.check(f"fields.{field}.{key}", value)
        self.cross_check(field, out)
        return out

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """Check options against each other (default: nothing to check)."""

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """Return the storage of one sample in a store of side ``size``."""
        raise NotImplementedError

    def pad(self, opts: Mapping[str, Any]) -> int | float:
        """The letterbox padding value of a spatial field (default: the hole value)."""
        return self.storage(opts, 1).fill

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """Return ``value`` as the stored array; raise ``ValueError`` naming what is wrong."""
        raise NotImplementedError

    def parse_inline(self, raw: Any) -> Any:
        """Parse a manifest cell of an inline kind into a hashable value (``ValueError``)."""
        raise ValueError(f"kind {self.name!r} is read from a file, not written inline")

    def validate(self, value: Any, field: str, opts: Mapping[str, Any], key: str) -> np.ndarray:
        """Return ``value`` checked and converted for storage.

        Raises:
            DecodeError: Naming the input ``key``, the field and what is wrong with the value.
        """
        try:
            return self.check(value, opts)
        except ValueError as exc:
            raise DecodeError(key, f"field {field!r} ({self.name}): {exc}") from None
