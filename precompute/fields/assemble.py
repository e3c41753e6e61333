"""One sample of a field source, decoded, checked and placed in the stored frame.

:func:`assemble` is what a v2 shard task will run per item: read each file field, decode it by
its kind's ``decoder`` (:data:`DECODE`), check it (``Kind.validate``), check that every spatial
file field has the frame's size, build the sample's one :class:`~precompute.fields.geometry.
Placement` from the frame field (:func:`~precompute.fields.spec.frame_field`: the first image,
else the first spatial file field, e.g. a spectral cube), and place every field with it. Any
problem with the item is a :class:`~precompute.errors.DecodeError` naming the file (or the item,
for an inline value): a per-input error that the build's ``on_error`` policy handles.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any, TypeVar

import numpy as np

from precompute.checks import Size, size_hw
from precompute.errors import DecodeError, InputError
from precompute.fields.geometry import Placement, check_frame, place_field, placement
from precompute.fields.registry import add_entry, entry_for
from precompute.fields.spec import FieldSpec, check_fields, frame_field
from precompute.notes import collecting, forward
from precompute.sources.fields import FieldItem
from precompute.stages.augment import colour_jitter

if TYPE_CHECKING:
    from precompute.transforms.apply import SampleTransform

__all__ = [
    "DECODE",
    "FileInput",
    "assemble",
    "decoder_of",
    "moved_companions",
    "register_decoder",
]

VariantDraw = tuple[Placement, Any]  # where one variant lands, and its colour factors

T = TypeVar("T")
Reader = Callable[[FieldItem, str], bytes]
Opener = Callable[[FieldItem, str], IO[bytes]]


@dataclass(frozen=True)
class FileInput:
    """A file field's input, handed to a decoder that reads it itself (``takes_input``).

    A decoder whose function has ``takes_input = True`` gets this instead of the bytes: it
    may read the whole file (``read``: bounded by the spec's ``max_bytes``, with the read
    deadline) or open it as a seekable stream (``open``: to decode only part of a long file).
    Errors of either are :class:`~precompute.errors.DecodeError` naming the file.
    """

    key: str
    read: Callable[[], bytes]
    open: Callable[[], IO[bytes]]


Decoder = Callable[[Any, str, FieldSpec, int], Any]  # bytes; a FileInput with takes_input

# Decoders of file fields, by the names the kinds declare (``Kind.decoder``): every one is
# registered by the kind module that owns it (register_decoder).
_DECODE: dict[str, Decoder] = {}
DECODE: Mapping[str, Decoder] = MappingProxyType(_DECODE)


def register_decoder(name: str, decoder: Decoder) -> Decoder:
    """Add the file decoder ``name`` (``decoder(data, key, field, max_pixels) -> value``).

    Raises:
        SpecError: A decoder of that name is registered already.
    """
    return add_entry(_DECODE, "field decoder", name, decoder)


def decoder_of(field: FieldSpec) -> Decoder:
    """The registered decoder of a file ``field`` (a :class:`SpecError` naming it if none)."""
    lacks = "which no module has registered (register_decoder"
    return entry_for(_DECODE, field.spec.decoder, field, "decodes with", lacks)


def _named(access: Callable[[FieldItem, str], T], item: FieldItem, field: str) -> T:
    """``access(item, field)``, its input errors as a :class:`DecodeError` naming the file."""
    key = item.file(field)
    try:
        return access(item, field)
    except InputError as exc:
        raise DecodeError(key, exc.reason) from exc
    except OSError as exc:
        raise DecodeError(key, f"cannot read: {exc}") from exc


def _read(read: Reader, item: FieldItem, field: str) -> bytes:
    return _named(read, item, field)


def _open(opener: Opener | None, read: Reader, item: FieldItem, field: str) -> IO[bytes]:
    if opener is None:  # a caller without streams: the whole file, in memory
        return io.BytesIO(_read(read, item, field))
    return _named(opener, item, field)


def _input(
    item: FieldItem, field: str, read: Reader, opener: Opener | None, takes_input: bool
) -> bytes | FileInput:
    """What the field's decoder takes: the file's bytes, or a :class:`FileInput`."""
    if not takes_input:
        return _read(read, item, field)
    return FileInput(
        item.file(field),
        lambda: _read(read, item, field),
        lambda: _open(opener, read, item, field),
    )


def _segment_of(item: FieldItem, field: FieldSpec) -> tuple[Any, ...]:
    """``(segment,)`` when the item carries ``FIELD.segment`` (an audio clip's span), or ``()``."""
    seg = dict(item.values).get(f"{field.name}.segment")
    return () if seg is None else (seg,)


def _raw(
    item: FieldItem, field: FieldSpec, read: Reader, max_pixels: int, opener: Opener | None
) -> tuple[Any, str]:
    """``(raw value, key)``: a file field as its decoder gives it, an inline one as parsed."""
    if field.spec.source == "inline":
        return item.value(field.name), item.key
    key = item.file(field.name)
    decoder = decoder_of(field)
    data = _input(item, field.name, read, opener, getattr(decoder, "takes_input", False))
    return decoder(data, key, field, max_pixels, *_segment_of(item, field)), key


def _companions(field: FieldSpec, raw: Any, key: str) -> dict[str, Any]:
    """The companions' values of ``field``'s decoded ``raw`` by ``FIELD.WHAT``."""
    try:
        extra = field.spec.companion_values(raw, field.options)
    except ValueError as exc:
        raise DecodeError(key, f"field {field.name!r} ({field.spec.name}): {exc}") from None
    return {f"{field.name}.{what}": v for what, v in extra.items()}


def _value(
    item: FieldItem, field: FieldSpec, read: Reader, max_pixels: int, opener: Opener | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """The checked value of ``field`` and its companions' values by ``FIELD.WHAT``."""
    raw, key = _raw(item, field, read, max_pixels, opener)
    value = field.spec.validate(raw, field.name, field.options, key)
    return value, _companions(field, raw, key)


def _decoded_values(
    item: FieldItem,
    fields: Sequence[FieldSpec],
    read: Reader,
    max_pixels: int,
    opener: Opener | None,
    transform: SampleTransform,
    size: Size,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Every field's value after a ``decoded`` transform ran, and its companions.

    Also what the transform was given and returned of each file field (by name): the
    ``before`` and ``after`` its notes are judged by (``Kind.note_holds``).
    """
    raws: dict[str, Any] = {}
    values: dict[str, Any] = {}
    companions: dict[str, Any] = {}
    for f in fields:
        if f.spec.source == "file":
            raws[f.name], key = _raw(item, f, read, max_pixels, opener)
            companions.update(_companions(f, raws[f.name], key))
        else:
            values[f.name], extra = _value(item, f, read, max_pixels, opener)
            companions.update(extra)

    given = {f.name: getattr(raws[f.name], "value", raws[f.name]) for f in fields if f.name in raws}
    returned: dict[str, Any] = {}

    def check(f: FieldSpec, raw: Any) -> Any:
        returned[f.name] = getattr(raw, "value", raw)
        return f.spec.validate(raw, f.name, f.options, item.file(f.name))

    checked = transform.decoded(item.key, raws, values, fields, check, size)
    return checked, companions, given, returned


def assemble(
    item: FieldItem,
    fields: Sequence[FieldSpec],
    read: Reader,
    size: Size,
    mode: str,
    max_pixels: int,
    opener: Opener | None = None,
    variants: Callable[[int, int], Sequence[VariantDraw]] | None = None,
    transform: SampleTransform | None = None,
) -> tuple[dict[str, np.ndarray], Any]:
    """Return one item's stored values by array name, and its ``extent``.

    The values are every field's, placed, and its kind's companions
    (``Kind.companion_values`` of the decoded value, named ``FIELD.WHAT``; those the kind
    computes from the placed value instead, ``Kind.moved_companions``, replace them).

    Args:
        item: The item (from :mod:`precompute.sources.fields`).
        fields: The store's fields (their kinds decide everything below).
        read: ``read(item, field) -> bytes`` (e.g. ``FieldSource.read_bytes``).
        size: The stored frame: side S, or ``WxH``.
        mode: The build's ``mode`` (``squash``, ``center-crop``, ``letterbox``).
        max_pixels: The decompression-bomb guard of every image-like file.
        opener: ``opener(item, field) -> binary stream`` of a file field, for decoders that
            read part of a file (:class:`FileInput`); None: they get its bytes in memory.
        variants: For a store of K offline-augmented variants: ``variants(w, h)`` gives the
            K ``(placement, colour factors)`` of the item's frame
            (:func:`~precompute.fields.geometry.variant_draws`); every spatial field is
            placed once per variant, photometric ones jittered, and the ``extent`` is
            ``(K, 4)``.
        transform: The user's transform (:mod:`precompute.transforms.apply`), run on the
            sample as decoded (before the placement) or as stored (after it), by its ``at``.

    Raises:
        DecodeError: A file that cannot be read or decoded, a value its kind refuses, or a
            spatial field whose size differs from the image's.
    """
    fields = check_fields(fields)
    if transform is None:
        return _assembled(item, fields, read, size, mode, max_pixels, opener, variants, None)
    seen: dict[str, Any] = {}
    with collecting() as made:  # notes of the source: kept only where still true once stored
        stored, extent = _assembled(item, fields, read, size, mode, max_pixels, opener,
                                    variants, transform, seen)  # fmt: skip
    before, after = seen.get("before", {}), seen.get("after", {})
    changed = [f for f in fields if f.name in after]
    forward(made, lambda name: all(
        f.spec.note_holds(name, before[f.name], after[f.name]) for f in changed
    ))  # fmt: skip
    for f in fields:  # notes of what is stored (keypoints a crop cut off), after the transform
        if f.name in seen.get("placed", {}):
            f.spec.placed(item.key, *seen["placed"][f.name])
    return stored, extent


def _assembled(
    item: FieldItem,
    fields: Sequence[FieldSpec],
    read: Reader,
    size: Size,
    mode: str,
    max_pixels: int,
    opener: Opener | None,
    variants: Callable[[int, int], Sequence[VariantDraw]] | None,
    transform: SampleTransform | None,
    seen: dict[str, Any] | None = None,
) -> tuple[dict[str, np.ndarray], Any]:
    """:func:`assemble`'s work, with ``seen`` told what a transform did.

    ``seen`` gets what the transform was given and returned (``before``, ``after``: by
    field name) and, with a transform, the kinds' ``placed`` calls (deferred until the
    source's notes are decided).
    """
    values: dict[str, Any] = {}
    companions: dict[str, Any] = {}
    seen = {} if seen is None else seen
    if transform is not None and transform.at == "decoded":
        values, companions, seen["before"], seen["after"] = _decoded_values(
            item, fields, read, max_pixels, opener, transform, size
        )
    else:
        for f in fields:
            values[f.name], extra = _value(item, f, read, max_pixels, opener)
            companions.update(extra)
    after = transform if transform is not None and transform.at == "stored" else None
    frame = frame_field(fields)
    if frame is None:  # no spatial field: nothing to place
        if after is not None:
            whole = (0, 0, *size_hw(size))
            seen["before"], values = values, after.stored(item.key, values, fields, size, whole)
            seen["after"] = values
        return {**values, **companions, **moved_companions(fields, values, size)}, (
            0,
            0,
            *size_hw(size),
        )
    h, w = values[frame.name].shape[:2]
    for f in fields:
        if f.spatial and f.spec.source == "file":
            check_frame(item.file(f.name), f.name, values[f.name], (w, h))
    if variants is not None:
        placed_k, extents = _variants(fields, values, variants(w, h))
        return {**placed_k, **companions, **moved_companions(fields, placed_k, size)}, extents
    p = placement(w, h, size, mode)
    placed = {f.name: place_field(f, values[f.name], p) for f in fields}
    if after is not None:
        seen["before"], placed = placed, after.stored(item.key, placed, fields, size, p.extent)
        seen["after"] = placed
    for f in fields:  # build notes (with a transform: once its source notes are decided)
        if transform is None:
            f.spec.placed(item.key, values[f.name], placed[f.name], (w, h))
        else:
            seen.setdefault("placed", {})[f.name] = (values[f.name], placed[f.name], (w, h))
    return {**placed, **companions, **moved_companions(fields, placed, size)}, p.extent


def moved_companions(
    fields: Sequence[FieldSpec], placed: Mapping[str, Any], size: Size
) -> dict[str, np.ndarray]:
    """The companions each kind computes from its placed value (``Kind.moved_companions``)."""
    out = {}
    for f in fields:
        storage = f.spec.companions(f.options, size)
        for what, v in f.spec.moved_companions(placed[f.name], f.options).items():
            out[f"{f.name}.{what}"] = np.asarray(v, dtype=storage[what].dtype)
    return out


def _variants(
    fields: Sequence[FieldSpec], values: Mapping[str, Any], draws: Sequence[VariantDraw]
) -> tuple[dict[str, Any], Any]:
    """Every spatial field placed once per variant (stacked on a variant axis), jittered."""
    out: dict[str, Any] = dict(values)
    for f in fields:
        if f.spatial:
            out[f.name] = np.stack(
                [_jittered(f, place_field(f, values[f.name], p), c) for p, c in draws]
            )
    return out, np.asarray([p.extent for p, _ in draws], dtype=np.int32)


def _jittered(field: FieldSpec, value: np.ndarray, factors: Any) -> np.ndarray:
    return colour_jitter(value, factors) if field.spec.photometric else value
