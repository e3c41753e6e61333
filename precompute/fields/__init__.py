"""Named fields of a store (format v2, see ``docs/FORMAT.md``): kinds, specs and geometry.

:mod:`~precompute.fields.registry` is the one registry of kinds (each kind is a module of
:mod:`precompute.kinds`, loaded at the first look-up); :mod:`~precompute.fields.spec` parses
:class:`FieldSpec`; :mod:`~precompute.fields.geometry` places every spatial field of a
sample in the stored frame with one placement; :mod:`~precompute.fields.masks` decodes masks.
"""

from precompute.fields.base import ClassCounts, Kind, Storage
from precompute.fields.registry import KINDS, kind_of, register_kind
from precompute.fields.spec import (
    RESERVED,
    FieldSpec,
    check_fields,
    fields_table,
    parse_fields_table,
    v1_fields,
)

__all__ = [
    "KINDS",
    "RESERVED",
    "ClassCounts",
    "FieldSpec",
    "Kind",
    "Storage",
    "check_fields",
    "fields_table",
    "kind_of",
    "parse_fields_table",
    "register_kind",
    "v1_fields",
]
