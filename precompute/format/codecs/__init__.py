"""Per-field chunk codecs: what a field's inner chunks are stored as, chosen at build.

A field is stored raw by default (``[bytes, crc32c]``, ``docs/FORMAT.md``). A build may give
it a codec (``--codec image=jpeg:90,mask=zstd:3``): a :class:`CodecSpec` (a registered codec's
name and its options, every option present), part of the build spec and so of its hash and the
cache key. Each codec is one module of this package, beside
:mod:`precompute.format.shardcodec`, registered here by name (:data:`BUILTIN`, loaded at the
first look-up, or :func:`register_codec`):

- ``zstd`` (:mod:`precompute.format.codecs.zstd`): lossless, any field; Zarr v3's own ``zstd``
  codec inside the sharding codec (``[bytes, zstd, crc32c]``).
- ``jpeg`` (:mod:`precompute.format.codecs.jpeg`): lossy, image fields; the ``nostall.jpeg``
  array-to-bytes codec (``[nostall.jpeg, crc32c]``).

The crc32c stays the last inner codec, over the bytes as stored: a damaged compressed chunk
fails its checksum before anything decodes it. Which codecs a field takes is its kind's rule
(``Kind.codecs``); :func:`array_codecs` checks a build's choice against its fields, naming the
field, its kind and the codec it refuses.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from precompute.errors import SpecError
from precompute.fields.options import Option
from precompute.policy import show

__all__ = [
    "BUILTIN",
    "CODECS",
    "Codec",
    "CodecSpec",
    "array_codecs",
    "codec_from_meta",
    "codec_of",
    "parse_codec_flag",
    "register_codec",
]

# Built-in codecs: the module that registers each, imported at the first look-up.
BUILTIN = {"zstd": "precompute.format.codecs.zstd", "jpeg": "precompute.format.codecs.jpeg"}
RAW = "raw"  # no codec: said on the command line, never stored


class Codec(ABC):
    """A chunk codec: its options, the Zarr codecs it stands for, and its chunk bytes.

    Attributes:
        name: The registry name, written in specs (``jpeg``).
        lossy: Decoded values may differ from those written (verify then checks the decode,
            not the values).
        args: The option each ``:``-separated argument of a ``--codec`` flag sets, in order.
        options: Option name -> default and checker.
        package: What to install when the codec's library is missing (said in the error).
    """

    name: ClassVar[str]
    lossy: ClassVar[bool] = False
    args: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[Mapping[str, Option]] = MappingProxyType({})
    package: ClassVar[str] = ""

    def normalize(self, where: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every option checked, defaults filled in (``SpecError`` naming ``where.OPTION``)."""
        unknown = sorted(set(map(str, given)) - set(self.options))
        if unknown:
            raise SpecError(
                f"{where}: unknown option(s) {unknown} of codec {self.name!r}; "
                f"known: {sorted(self.options)}"
            )
        return {
            k: o.check(f"{where}.{k}", given.get(k, o.default)) for k, o in self.options.items()
        }

    def refuses(self, dtype: str, shape: tuple[int, ...]) -> str | None:
        """Why samples of ``shape`` and ``dtype`` cannot be stored so (None: they can)."""
        return None

    @abstractmethod
    def zarr(self, opts: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        """``(serializer, compressors)`` for ``zarr.create_array`` (crc32c added by the writer)."""

    @abstractmethod
    def meta(self, opts: Mapping[str, Any], itemsize: int) -> list[dict[str, Any]]:
        """The inner codecs' JSON before the crc32c, as an array's ``zarr.json`` holds them."""

    @abstractmethod
    def encode(self, chunk: np.ndarray, opts: Mapping[str, Any], fill: Any) -> bytes:
        """The stored bytes (without the crc32c) of one whole inner chunk, little endian."""

    @abstractmethod
    def decode_into(self, data: Any, out: np.ndarray, opts: Mapping[str, Any], fill: Any) -> None:
        """Decode one chunk's stored bytes (without the crc32c) into ``out`` (its shape).

        Raises:
            ValueError: The bytes do not decode to a chunk of ``out``'s shape and dtype.
        """

    def decode_rows(
        self,
        data: Any,
        rows: Sequence[np.ndarray | None],
        chunk: np.ndarray,
        opts: Mapping[str, Any],
        fill: Any,
    ) -> None:
        """Decode the chunk's rows (axis 0) into ``rows`` (None: a row no one asked for).

        Default: the whole chunk into ``chunk`` (scratch of the chunk's shape), then a copy of
        each asked row. A codec that stores rows apart (``jpeg``) decodes only those.
        """
        self.decode_into(data, chunk, opts, fill)
        for i, row in enumerate(rows):
            if row is not None:
                row[...] = chunk[i]

    def ensure(self) -> None:
        """Import the codec's library now (ImportError naming :attr:`package`)."""
        return None

    @abstractmethod
    def options_of(
        self, chain: Sequence[Mapping[str, Any]], itemsize: int
    ) -> dict[str, Any] | None:
        """The options of this codec whose :meth:`meta` is ``chain``; None: not this codec's."""


CODECS: dict[str, Codec] = {}


def register_codec(codec: Codec) -> None:
    """Add ``codec`` to the registry under its name (a second codec of that name is refused)."""
    if codec.name in CODECS or codec.name == RAW:
        raise SpecError(f"a codec named {codec.name!r} is registered already")
    CODECS[codec.name] = codec


def codec_of(name: str) -> Codec:
    """The registered codec ``name`` (a built-in one is imported at its first look-up).

    Raises:
        SpecError: No codec of that name.
    """
    if name not in CODECS and isinstance(name, str) and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    if name not in CODECS:
        known = sorted({*BUILTIN, *CODECS, RAW})
        raise SpecError(f"unknown codec {show(name)}; known: {', '.join(known)}")
    return CODECS[name]


@dataclass(frozen=True)
class CodecSpec:
    """A codec and its options, every option present (parsed once, hashable, JSON-ready).

    Attributes:
        name: A registered codec's name.
        options: Its options, checked, defaults filled in (read-only).
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        opts = self.codec.normalize(f"codec {self.name}", self.options)
        object.__setattr__(self, "options", MappingProxyType(opts))

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.options.items()))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CodecSpec) and self.to_dict() == other.to_dict()

    @property
    def codec(self) -> Codec:
        """The registered codec."""
        return codec_of(self.name)

    @property
    def lossy(self) -> bool:
        """Decoded values may differ from those written."""
        return self.codec.lossy

    def to_dict(self) -> dict[str, Any]:
        """``{"name": NAME, OPTION: value, ...}`` (every option)."""
        return {"name": self.name, **self.options}

    def __str__(self) -> str:
        return ":".join([self.name, *(str(self.options[a]) for a in self.codec.args)])

    @classmethod
    def from_dict(cls, data: Any, where: str = "codec") -> CodecSpec:
        """Parse ``{"name": ..., OPTION: ...}`` or the flag text ``NAME[:ARG...]``.

        Raises:
            SpecError: Not a mapping or text, an unknown codec or option, a bad value.
        """
        if isinstance(data, str):
            return parse_codec(data, where)
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            raise SpecError(f"{where} must be a codec name or {{name, options}}, got {show(data)}")
        opts = {k: v for k, v in data.items() if k != "name"}
        try:
            return cls(data["name"], opts)
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None


def parse_codec(text: str, where: str = "codec") -> CodecSpec:
    """``NAME[:ARG[:ARG]]`` (``zstd:3``, ``jpeg:90:444``) as a :class:`CodecSpec`."""
    name, *args = text.strip().split(":")
    try:
        codec = codec_of(name)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    if len(args) > len(codec.args):
        raise SpecError(
            f"{where}: {text!r} gives {len(args)} arguments; codec {name!r} takes "
            f"{len(codec.args)} ({':'.join([name, *codec.args])})"
        )
    opts: dict[str, Any] = {}
    for key, arg in zip(codec.args, args, strict=False):
        opts[key] = int(arg) if arg.lstrip("-").isdigit() else arg
    try:
        return CodecSpec(name, opts)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None


def parse_codec_flag(text: str) -> dict[str, dict[str, Any] | None]:
    """``FIELD=CODEC,...`` (``image=jpeg:90,mask=zstd:3``) as ``{field: codec dict}``.

    ``FIELD=raw`` maps the field to None (stored raw, as without the flag).

    Raises:
        SpecError: A part without ``=``, a field named twice, an unknown codec or option.
    """
    out: dict[str, dict[str, Any] | None] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        field, sep, codec = part.partition("=")
        field, codec = field.strip(), codec.strip()
        if not sep or not field or not codec:
            raise SpecError(f"--codec {text!r}: {part!r} is not FIELD=CODEC (e.g. image=jpeg:90)")
        if field in out:
            raise SpecError(f"--codec {text!r}: field {field!r} is named twice")
        where = f"--codec {field}"
        out[field] = None if codec == RAW else parse_codec(codec, where).to_dict()
    return out


def codec_from_meta(chain: Sequence[Mapping[str, Any]], itemsize: int) -> CodecSpec | None:
    """The :class:`CodecSpec` whose inner codecs (before the crc32c) are ``chain``, or None.

    None also for options this nostall would not write (a zstd level outside 1-22): such an
    array is read through zarr-python.
    """
    for name in BUILTIN:
        codec_of(name)
    for codec in list(CODECS.values()):
        opts = codec.options_of(chain, itemsize)
        if opts is not None:
            try:
                return CodecSpec(codec.name, opts)
            except SpecError:
                return None
    return None


def array_codecs(
    codecs: Mapping[str, CodecSpec], fields: Sequence[Any], dtypes: Mapping[str, Any]
) -> dict[str, CodecSpec]:
    """The codec of each coded field's array, checked against its kind and storage.

    Args:
        codecs: The build's choice, field name -> codec.
        fields: The store's fields (:class:`~precompute.fields.FieldSpec`; a v1 store's
            ``v1_fields``).
        dtypes: Field name -> ``(shape, dtype)`` of one stored sample; a field left out (its
            storage needs an option the build learns from the source) is checked against its
            kind only.

    Raises:
        SpecError: A codec for no field of the store, or one the field's kind does not take
            (naming the field, its kind, the codec and what the kind takes), or samples the
            codec cannot hold.
    """
    by_name = {f.name: f for f in fields}
    out = {}
    for name, spec in codecs.items():
        field = by_name.get(name)
        if field is None:
            raise SpecError(
                f"codecs.{name}: the store has no field {name!r} "
                f"(its fields: {', '.join(by_name) or 'none'})"
            )
        takes = tuple(field.spec.codecs)
        if spec.name not in takes:
            raise SpecError(
                f"codecs.{name}: field {name!r} of kind {field.kind!r} cannot be stored as "
                f"{spec.name!r}; kind {field.kind!r} takes {', '.join([RAW, *takes])}"
            )
        shape, dtype = dtypes.get(name, ((), None))
        why = spec.codec.refuses(dtype, shape) if dtype is not None else None
        if why:
            raise SpecError(
                f"codecs.{name}: codec {spec.name!r} cannot store field {name!r}: {why}"
            )
        out[name] = spec
    return out
