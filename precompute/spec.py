"""Frozen, parsed build specs.

A :class:`BuildSpec` is parsed once at the boundary (CLI flags, YAML, an HTTP request), is
immutable afterwards, round-trips through :meth:`BuildSpec.to_dict` / :meth:`BuildSpec.from_dict`,
and hashes to a stable hex digest that is part of the store's identity and of the cache key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from precompute.checks import Size, check_integer, check_size, size_hw
from precompute.errors import SpecError
from precompute.fields import FieldSpec, check_fields
from precompute.format.codecs import CodecSpec, array_codecs
from precompute.policy import POLICIES, Policy, check_bounded, check_bounded_pair
from precompute.policy import show as _show
from precompute.sources.inputs import DEFAULT_MAX_BYTES
from precompute.sources.listing import ON_ERROR
from precompute.sources.manifests import MAX_LABEL
from precompute.transforms.spec import TransformSpec

__all__ = ["MAX_CLASSES", "MODES", "AugmentPolicy", "BuildSpec", "check_classes"]

MODES = ("letterbox", "center-crop", "squash")
# Pillow's own default decompression-bomb limit; a header claiming more pixels is refused.
DEFAULT_MAX_PIXELS = 89_478_485
_OFFLINE = POLICIES["offline"]
# Fields added after stores were first built: left out of to_dict() while at their default,
# so a store built before keeps its spec hash and its cache key.
_LATE_DEFAULTS: dict[str, Any] = {
    "max_bytes": DEFAULT_MAX_BYTES,
    "fields": [],
    "columns": {},
    "classes": [],
    "codecs": {},
    "transform": None,
}
MAX_CLASSES = MAX_LABEL + 1  # every class index a label may hold
_COLUMN_FIELD = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)  # a field name (FieldSpec's rule)


@dataclass(frozen=True)
class AugmentPolicy:
    """Offline augmentation applied to each stored variant, as data.

    Defaults are the ``offline`` entry of :data:`precompute.policy.POLICIES`; the valid
    ranges are its ``BOUNDS``. The variants are drawn by :mod:`precompute.cropsampler`, version
    :data:`SAMPLER` of its draw, recorded as ``sampler`` in :meth:`to_dict` (so in the spec
    hash: a store drawn by another sampler is another store).

    Attributes:
        scale: Random resized crop area fraction range of the source image.
        ratio: Random resized crop aspect-ratio range (width / height).
        brightness: Brightness jitter strength; the factor is drawn from [1-b, 1+b].
        contrast: Contrast jitter strength; the factor is drawn from [1-c, 1+c].
        saturation: Saturation jitter strength; the factor is drawn from [1-s, 1+s].
    """

    SAMPLER: ClassVar[int] = 2  # 1: the per-attempt draw of stores built before it was named

    scale: tuple[float, float] = _OFFLINE.scale
    ratio: tuple[float, float] = _OFFLINE.ratio
    brightness: float = _OFFLINE.jitter[0]
    contrast: float = _OFFLINE.jitter[1]
    saturation: float = _OFFLINE.jitter[2]

    def __post_init__(self) -> None:
        for name, bound in (("scale", "scale"), ("ratio", "ratio")):
            object.__setattr__(
                self, name, check_bounded_pair(f"augment.{name}", getattr(self, name), bound)
            )
        for name in ("brightness", "contrast", "saturation"):
            value = float(check_bounded(f"augment.{name}", getattr(self, name), "jitter"))
            object.__setattr__(self, name, value)

    @cached_property
    def policy(self) -> Policy:
        """The crop and jitter ranges, as the crop sampler takes them (no flip).

        Built once per spec (the spec is frozen), not once per sample and variant.
        """
        return Policy(
            scale=self.scale,
            ratio=self.ratio,
            attempts=_OFFLINE.attempts,
            flip=_OFFLINE.flip,
            jitter=(self.brightness, self.contrast, self.saturation),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict, with the sampler version under ``sampler``."""
        items = dataclasses.asdict(self).items()
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in items}
        return {**out, "sampler": self.SAMPLER}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AugmentPolicy:
        """Parse a dict produced by :meth:`to_dict` (unknown keys are an error).

        ``sampler`` may be left out (a hand-written spec); if given it must be :data:`SAMPLER`.
        """
        data = dict(data)
        sampler = data.pop("sampler", cls.SAMPLER)
        if sampler != cls.SAMPLER:
            raise SpecError(
                f"augment.sampler {sampler!r} is not built by this nostall (it draws sampler "
                f"{cls.SAMPLER}); drop the key or rebuild the store with this version"
            )
        _check_keys("augment", data, cls)
        kwargs: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }
        return cls(**kwargs)


def check_classes(value: Any) -> tuple[str, ...]:
    """A fixed class list (``classes``): distinct non-empty names, in order (index = position).

    Raises:
        SpecError: Not a list of names, an empty or invalid name, or a name given twice.
    """
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SpecError(f"classes must be a list of class names, got {_show(value)}")
    if len(value) > MAX_CLASSES:
        raise SpecError(f"classes holds {len(value)} names; at most {MAX_CLASSES}")
    seen: dict[str, int] = {}
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name.strip() or "\0" in name:
            raise SpecError(f"classes[{i}] must be a class name, got {_show(name)}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise SpecError(f"classes[{i}] {_show(name)} is not valid text") from None
        if name in seen:
            raise SpecError(f"classes names {_show(name)} twice (at {seen[name]} and {i})")
        seen[name] = i
    return tuple(value)


def _check_keys(where: str, data: Mapping[str, Any], cls: type) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise SpecError(f"unknown {where} field(s) {unknown}; known: {sorted(known)}")


@dataclass(frozen=True)
class BuildSpec:
    """Everything that decides the bytes of a store, and nothing else.

    Attributes:
        size: Stored side length S (images are stored as S x S x 3 uint8), or a frame of
            width W and height H, ``"WxH"`` (``--size 512x384``; given as that text or a
            ``(W, H)`` pair, kept as the text; a square ``WxH`` is its side ``S``).
        mode: ``letterbox`` (fit inside, pad with ``fill``, record the valid extent),
            ``center-crop`` (resize the short side to S, crop the centre) or ``squash``.
        seed: Seed of the pre-shuffled sample order and of offline augmentation.
        shard_samples: Samples per shard file (one writer per shard).
        chunk_samples: Samples per inner chunk (the unit a loader reads).
        variants: K augmented copies per sample (1 = no offline augmentation).
        augment: Offline augmentation policy; required iff ``variants > 1``.
        on_error: ``raise`` on the first bad input, or ``skip`` it and record why.
        max_pixels: Inputs whose header claims more pixels are refused (decompression bombs).
        max_bytes: Inputs of more bytes are refused without being read (default 256 MiB).
        fill: Letterbox padding value.
        fields: The named fields of a format v2 store (``docs/FORMAT.md``); empty: a v1
            store of ``image`` + ``label``. Part of :meth:`to_dict` only when not empty, so
            every v1 spec keeps its hash.
        columns: For a Parquet or WebDataset source: ``(field, column)`` pairs, the column
            (or member suffix) each field reads where the source's names leave it in doubt
            (``--columns image=img,label=fine_label``; ``docs/sources.md``); sorted by field.
            Given as a mapping. Part of :meth:`to_dict` only when not empty.
        classes: A fixed class list (``--classes``, ``docs/manifests.md``): a label is the
            position of its class name here, in every field of class names (a v1 store's
            label, ``label``, ``labels``), whatever the source holds
            (:mod:`precompute.sources.classlist`). Empty: the classes are the source's (class
            folders, or the names its labels give, sorted). Part of :meth:`to_dict` only when
            not empty.
        codecs: ``(field, codec)`` pairs, sorted by field: the chunk codec each named field
            is stored with (``--codec image=jpeg:90,mask=zstd:3``; :mod:`precompute.format.codecs`);
            every other field is stored raw. Given as a mapping of field names to a
            :class:`~precompute.format.codecs.CodecSpec`, its dict or its text (``jpeg:90``);
            ``raw`` or None leaves the field out. Part of :meth:`to_dict` only when not empty,
            so a raw store keeps its hash.
        transform: The user's transform (``--transform pkg.module:function``,
            ``docs/transforms.md``): its name, arguments, where it runs and the fingerprint
            of its code (:class:`~precompute.transforms.spec.TransformSpec`; given as one, its
            dict or its ``pkg.module:function`` text). Part of :meth:`to_dict` only when set.
    """

    size: Size = 224
    mode: str = "center-crop"
    seed: int = 0
    shard_samples: int = 256
    chunk_samples: int = 32
    variants: int = 1
    augment: AugmentPolicy | None = None
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_bytes: int = DEFAULT_MAX_BYTES
    fill: int = 0
    fields: tuple[FieldSpec, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    classes: tuple[str, ...] = ()
    codecs: tuple[tuple[str, CodecSpec], ...] = ()
    transform: TransformSpec | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        # 1: small spectral patches are stored as cut
        object.__setattr__(self, "size", check_size("size", self.size, 1, 8192, SpecError))
        self._check_int("seed", 0, 2**63 - 1)
        self._check_int("shard_samples", 1, 1 << 20)
        self._check_int("chunk_samples", 1, 1 << 20)
        self._check_int("variants", 1, 64)
        self._check_int("max_pixels", 1, 1 << 40)
        self._check_int("max_bytes", 1, 1 << 40)
        self._check_int("fill", 0, 255)
        if self.mode not in MODES:
            raise SpecError(f"mode must be one of {MODES}, got {_show(self.mode)}")
        if self.on_error not in ON_ERROR:
            raise SpecError(f"on_error must be one of {ON_ERROR}, got {_show(self.on_error)}")
        if self.shard_samples % self.chunk_samples:
            raise SpecError(
                f"shard_samples ({self.shard_samples}) must be a multiple of "
                f"chunk_samples ({self.chunk_samples})"
            )
        if self.augment is not None and not isinstance(self.augment, AugmentPolicy):
            raise SpecError(f"spec field augment must be a mapping, got {_show(self.augment)}")
        if self.variants > 1 and self.augment is None:
            object.__setattr__(self, "augment", AugmentPolicy())
        if self.variants == 1 and self.augment is not None:
            raise SpecError("augment is only used with variants > 1; set variants or drop augment")
        if self.variants > 1 and isinstance(self.size, str):
            raise SpecError(
                f"variants {self.variants} with size {self.size}: offline variants are square "
                "crops; give one side S, or variants 1 (augment in the loader)"
            )
        if self.extra:
            raise SpecError(f"unknown build spec field(s) {sorted(map(str, self.extra))}")
        self._check_fields()
        self._check_columns()
        object.__setattr__(self, "classes", check_classes(self.classes))
        self._check_codecs()
        self._check_transform()

    def _check_transform(self) -> None:
        """``transform`` as a :class:`TransformSpec` (parsed from its dict or name)."""
        given = self.transform
        if given is None or isinstance(given, TransformSpec):
            value = given
        else:
            value = TransformSpec.from_dict(given)
        if value is not None and value.at == "stored" and self.variants > 1:
            raise SpecError(
                f"a transform at 'stored' with variants {self.variants}: run it at 'decoded' "
                "(once, before the variants are drawn)"
            )
        object.__setattr__(self, "transform", value)

    def _check_codecs(self) -> None:
        """``codecs`` as sorted ``(field, CodecSpec)`` pairs; against the fields when given."""
        given = self.codecs
        pairs = list(given.items()) if isinstance(given, Mapping) else given
        if not isinstance(pairs, (tuple, list)) or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs
        ):
            raise SpecError(f"codecs must map field names to codecs, got {_show(given)}")
        out = {}
        for name, codec in pairs:
            if not isinstance(name, str) or not _COLUMN_FIELD.fullmatch(name):
                raise SpecError(f"codecs: {_show(name)} is not a field name ([a-z][a-z0-9_]*)")
            if name in out:
                raise SpecError(f"codecs names the field {name!r} twice")
            if codec is None or codec == "raw":
                continue
            out[name] = (
                codec
                if isinstance(codec, CodecSpec)
                else CodecSpec.from_dict(codec, f"codecs.{name}")
            )
        if self.fields and out:  # fields inferred from the source are checked by the layout
            array_codecs(out, self.fields, self._known_storage(out))
        object.__setattr__(self, "codecs", tuple(sorted(out.items())))

    def _known_storage(self, codecs: Mapping[str, CodecSpec]) -> dict[str, Any]:
        """``(shape, dtype)`` of each coded field whose storage is known now.

        A field whose storage needs an option the build learns from the source (a box
        field's ``max_boxes``) is left out: checked against its kind here, against its storage
        by the layout once learned.
        """
        shapes = {}
        for f in self.fields:
            if f.name in codecs:
                try:
                    st = f.storage(self.size)
                except SpecError:
                    continue
                shapes[f.name] = (st.shape, st.dtype)
        return shapes

    def _check_columns(self) -> None:
        """``columns`` as sorted ``(field, column)`` pairs: field names, non-empty columns."""
        given = self.columns
        pairs = list(given.items()) if isinstance(given, Mapping) else given
        if not isinstance(pairs, (tuple, list)) or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs
        ):
            raise SpecError(f"columns must map field names to columns, got {_show(given)}")
        for name, column in pairs:
            if not isinstance(name, str) or not _COLUMN_FIELD.fullmatch(name):
                raise SpecError(f"columns: {_show(name)} is not a field name ([a-z][a-z0-9_]*)")
            if not isinstance(column, str) or not column.strip() or "\0" in column:
                raise SpecError(f"columns.{name} must name a column, got {_show(column)}")
        if len({n for n, _ in pairs}) != len(pairs):
            raise SpecError(f"columns names a field twice: {_show(given)}")
        object.__setattr__(self, "columns", tuple(sorted((n, c) for n, c in pairs)))

    def _check_fields(self) -> None:
        fields = self.fields
        if not isinstance(fields, (tuple, list)) or not all(
            isinstance(f, FieldSpec) for f in fields
        ):
            raise SpecError(f"fields must be a list of fields, got {_show(fields)}")
        object.__setattr__(self, "fields", check_fields(fields) if fields else ())
        if self.fields and self.variants > 1:
            raise SpecError(
                f"variants {self.variants} with fields: build-time augmentation moves images "
                "only, so a store with fields is built with variants 1 (augment in the loader)"
            )

    @property
    def frame(self) -> tuple[int, int]:
        """``(height, width)`` of the stored frame (``(S, S)`` for a side ``S``)."""
        return size_hw(self.size)

    def _check_int(self, name: str, lo: int, hi: int) -> None:
        value = check_integer(name, getattr(self, name), lo, hi, SpecError)
        object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """Return the canonical JSON-ready dict (every field, defaults included).

        Fields added after stores were first built (``max_bytes``, ``fields``) are left out
        while at their default, so the spec hash and the cache key of an existing store stay
        the same.
        """
        out = self.options()
        return {k: v for k, v in out.items() if k not in _LATE_DEFAULTS or _LATE_DEFAULTS[k] != v}

    def options(self) -> dict[str, Any]:
        """Every option, JSON-ready, those at their default too (``to_dict`` leaves some out)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["augment"] = self.augment.to_dict() if self.augment else None
        out["fields"] = [f.to_dict() for f in self.fields]
        out["columns"] = dict(self.columns)
        out["classes"] = list(self.classes)
        out["codecs"] = {name: codec.to_dict() for name, codec in self.codecs}
        out["transform"] = self.transform.to_dict() if self.transform else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildSpec:
        """Parse a dict (from JSON, YAML or a request); unknown keys raise :class:`SpecError`."""
        if not isinstance(data, Mapping):
            raise SpecError(f"a build spec must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if isinstance(kwargs.get("augment"), Mapping):
            kwargs["augment"] = AugmentPolicy.from_dict(kwargs["augment"])
        if isinstance(kwargs.get("fields"), (list, tuple)):
            kwargs["fields"] = tuple(FieldSpec.from_dict(f) for f in kwargs["fields"])
        try:
            return cls(**kwargs, extra=extra)
        except TypeError as exc:  # e.g. augment given as a list
            raise SpecError(f"invalid build spec: {exc}") from exc

    def canonical_json(self) -> str:
        """Return the spec as sorted, compact JSON: the input of :meth:`digest`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """Return the sha256 hex digest of the canonical JSON."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()
