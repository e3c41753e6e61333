"""Frozen, parsed field specs: a name, a kind and that kind's options.

A :class:`FieldSpec` is parsed once (from a build spec, a CLI flag or a store's fields
table), carries every option with its default filled in, and round-trips through
:meth:`FieldSpec.to_dict` / :meth:`FieldSpec.from_dict`. :func:`check_fields` checks a whole
list (unique names, spatial fields need a frame: :func:`frame_field`); :func:`fields_table` /
:func:`parse_fields_table` write and read the ``fields`` table of a v2 store's attributes,
and :func:`v1_fields` says how a v1 store reads as fields.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from precompute.checks import Size
from precompute.errors import SpecError
from precompute.fields.base import Kind, Storage
from precompute.fields.registry import kind_of
from precompute.policy import show

__all__ = [
    "RESERVED",
    "FieldSpec",
    "check_fields",
    "fields_table",
    "frame_field",
    "parse_fields_table",
    "v1_fields",
]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
# Names a field cannot take: store arrays and batch entries that are not fields.
RESERVED = frozenset({"key", "extent", "valid", "index", "is_pad", "variant"})


def _frozen(value: Any) -> Any:
    """JSON-like values as hashable ones: lists -> tuples, dicts -> read-only mappings."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _finite(value: Any) -> bool:
    """Whether no float in the JSON-like ``value`` is NaN or infinite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    return True


def _plain(value: Any) -> Any:
    """The inverse of :func:`_frozen`: JSON-ready lists and dicts."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class FieldSpec:
    """One named field of a store.

    Attributes:
        name: Lower-case identifier (``[a-z][a-z0-9_]*``), not one of :data:`RESERVED`; the
            store array and the batch entry of the field.
        kind: A registered kind (:data:`precompute.fields.registry.KINDS`).
        options: The kind's options, checked, every default filled in (read-only).
    """

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise SpecError(
                f"a field name must match [a-z][a-z0-9_]* (at most 64 characters), "
                f"got {show(self.name)}"
            )
        if self.name in RESERVED:
            raise SpecError(f"field name {self.name!r} is reserved ({sorted(RESERVED)})")
        if not isinstance(self.options, Mapping):
            raise SpecError(
                f"fields.{self.name}.options must be a mapping, got {show(self.options)}"
            )
        opts = kind_of(self.kind, self.name).normalize(self.name, self.options)
        for key, value in opts.items():
            if not _finite(value):  # a store's fields table is JSON, which has no NaN
                raise SpecError(
                    f"fields.{self.name}.{key} must hold finite numbers (JSON, which a store's "
                    f"metadata is, has no NaN or infinity), got {show(value)}"
                )
        object.__setattr__(self, "options", _frozen(opts))

    @property
    def spec(self) -> Kind:
        """The kind object that decides how this field is stored, resized and augmented."""
        return kind_of(self.kind, self.name)

    @property
    def spatial(self) -> bool:
        """The field lives in the image frame: one placement and one draw move it."""
        return self.spec.rules(self.options)[0]

    @property
    def resample(self) -> str:
        """The build's geometry rule (a key of ``precompute.fields.geometry.PLACE``)."""
        return self.spec.rules(self.options)[1]

    @property
    def augment(self) -> str:
        """The loader's geometry rule (a key of ``loaders.augment.rules.APPLY``)."""
        return self.spec.rules(self.options)[2]

    def storage(self, size: Size) -> Storage:
        """The per-sample storage of this field in a store of side ``size``."""
        return self.spec.storage(self.options, size)

    def with_options(self, **changes: Any) -> FieldSpec:
        """A copy with some options changed (e.g. ``points`` learned from the source)."""
        return FieldSpec(self.name, self.kind, {**self.options, **changes})

    @property
    def written_options(self) -> dict[str, Any]:
        """The options as specs and fields tables write them, JSON-ready.

        Every option, less a late one (``Option.late``: added after stores of the kind were
        built) at its default: a store built before it keeps its spec hash and cache key.
        """
        table = self.spec.options
        return {
            k: _plain(v)
            for k, v in self.options.items()
            if not (k in table and table[k].late and _plain(v) == _plain(table[k].default))
        }

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name", "kind", "options"}``, JSON-ready: :attr:`written_options`."""
        return {"name": self.name, "kind": self.kind, "options": self.written_options}

    @classmethod
    def from_dict(cls, data: Any) -> FieldSpec:
        """Parse a dict made by :meth:`to_dict` (``options`` may be left out)."""
        if not isinstance(data, Mapping):
            raise SpecError(f"a field must be a mapping with name and kind, got {show(data)}")
        unknown = sorted(set(map(str, data)) - {"name", "kind", "options"})
        name = data.get("name", "?")
        if unknown:
            raise SpecError(f"fields.{name}: unknown key(s) {unknown}; known: kind, name, options")
        if "name" not in data or "kind" not in data:
            raise SpecError(f"a field needs a name and a kind, got {show(dict(data))}")
        return cls(data["name"], data["kind"], data.get("options", {}))


def frame_field(fields: Iterable[FieldSpec]) -> FieldSpec | None:
    """The field whose source frame places every spatial field of a sample, or None.

    The first spatial field read from a file (an image, a spatial array such as a spectral
    cube, a mask), image kinds (``photometric``) first: inline spatial values (keypoints)
    have no frame of their own.
    """
    framing = [f for f in fields if f.spatial and f.spec.source == "file"]
    return next((f for f in framing if f.spec.photometric), framing[0] if framing else None)


def check_fields(fields: Iterable[FieldSpec]) -> tuple[FieldSpec, ...]:
    """Return ``fields`` as a tuple after checking them together.

    Raises:
        SpecError: No field, two fields of one name, or a spatial field (keypoints) without a
            spatial file field (:func:`frame_field`) to give it its frame.
    """
    out = tuple(fields)
    if not out:
        raise SpecError("a store needs at least one field")
    names = [f.name for f in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"field name(s) {twice} given twice")
    frame = frame_field(out)
    framed = [f.name for f in out if f.spatial and f is not frame]
    if framed and frame is None:
        raise SpecError(
            f"spatial field(s) {framed} need a field read from a file for their frame "
            "(an image, a mask or a spatial array)"
        )
    return out


def _entry(f: FieldSpec, size: Size) -> dict[str, Any]:
    st = f.storage(size)
    if not _finite(st.fill):
        raise SpecError(
            f"fields.{f.name}: kind {f.kind!r} stores a fill of {st.fill!r}; a store's metadata "
            "is JSON, which has no NaN or infinity"
        )
    return {
        "kind": f.kind,
        "shape": list(st.shape),
        "dtype": st.dtype,
        "fill": st.fill,
        "extent": "extent" if f.spatial else None,
        "options": f.written_options,
    }


def fields_table(fields: Sequence[FieldSpec], size: Size) -> dict[str, dict[str, Any]]:
    """The ``fields`` table of a v2 store's attributes: name -> kind, storage and options."""
    return {f.name: _entry(f, size) for f in check_fields(fields)}


def parse_fields_table(table: Any, size: Size) -> tuple[FieldSpec, ...]:
    """Read a ``fields`` table back; its storage entries must be what the options give.

    Raises:
        SpecError: A malformed table, or a shape/dtype/fill/extent that disagrees with the
            kind's storage for these options (the message names the field and the key).
    """
    if not isinstance(table, Mapping) or not table:
        raise SpecError(f"fields must be a non-empty mapping of name -> field, got {show(table)}")
    out = []
    for name, entry in table.items():
        if not isinstance(entry, Mapping):
            raise SpecError(f"fields.{name} must be a mapping, got {show(entry)}")
        spec = FieldSpec(name, entry.get("kind", "?"), entry.get("options", {}))
        want = _entry(spec, size)
        for key in ("shape", "dtype", "fill", "extent"):
            if entry.get(key) != want[key]:
                raise SpecError(
                    f"fields.{name}.{key} is {show(entry.get(key))}; a {spec.kind} field "
                    f"with these options has {show(want[key])}"
                )
        out.append(spec)
    return check_fields(out)


def v1_fields(num_classes: int | None = None, fill: int = 0) -> tuple[FieldSpec, ...]:
    """The fields of a v1 store: ``image`` (RGB, letterboxed on ``fill``), ``label`` (int64).

    A v1 store is built from these fields (the layout's v1 profile) and read as them.
    """
    return (
        FieldSpec("image", "image", {"channels": 3, "fill": fill}),
        FieldSpec("label", "label", {"classes": num_classes or None}),
    )
