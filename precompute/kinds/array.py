"""The ``array`` kind: any shape, dtype kept; with ``spatial: true`` an ``(H, W, C)`` cube.

A plain array is stored as given, untouched by geometry and augmentation. A spatial one (a
spectral cube, ``docs/arrays.md``) is stored ``(S, S, C)``, placed by the build rule ``array``
(:func:`precompute.arrays.resample.place_array`: per-band antialiased resampling in float64,
bit-exact at the source size) and cropped by the loader rule ``array``
(``loaders.augment.arrays.bands.crop_arrays``). Decoders: ``array`` (``.npy``, ``.npz``,
``.mat``, ``.tif`` files and scene patches: :func:`precompute.arrays.scenesrc.decode_patch`)
and ``npy`` (one ``.npy`` array, no pickles). Flag ``--key`` (option ``key``): the ``.npz``
member or ``.mat`` variable to read. Class folders or a ``path,label`` manifest of array files
are read by this module's source reader as ``image`` (this kind) + ``label``
(:mod:`precompute.arrays.buildsrc`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.arrays.buildsrc import (
    infer_array_fields,
    is_array_fields,
    is_array_source,
    list_array_fields,
)
from precompute.arrays.resample import place_array
from precompute.arrays.scenesrc import decode_patch
from precompute.checks import Size, size_hw
from precompute.errors import DecodeError, SpecError
from precompute.fields import FieldSpec, values
from precompute.fields.assemble import DECODE, register_decoder
from precompute.fields.base import Kind, Storage
from precompute.fields.geometry import PLACE, register_rule
from precompute.fields.options import REQUIRED, Flag, Option, check_dtype, check_shape, optional
from precompute.fields.registry import has_kind, register_kind
from precompute.kinds.hooks import SOURCE_READERS, SourceQuery, SourceReader, register_source
from precompute.policy import show
from precompute.sources.fields import FieldSource
from precompute.sources.folders import ARRAY_EXTENSIONS
from precompute.sources.named import field_columns

__all__ = ["ArrayKind", "decode_npy"]


def _flag(where: str, value: Any) -> bool:
    """A JSON boolean (``true``/``false``); other values, 0 and 1 included, are refused."""
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, got {show(value)}")
    return value


def _variable(where: str, value: Any) -> str:
    """A non-empty name (an ``.npz`` member, a ``.mat`` variable)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise SpecError(f"{where} must be an array or variable name, got {show(value)}")
    return value


class ArrayKind(Kind):
    """Any shape, dtype kept; with ``spatial: true`` an ``(H, W, C)`` cube in the image frame.

    A plain array is stored as given, untouched by geometry and augmentation. A spatial one
    (a spectral cube) declares its source shape ``[H, W, C]``; it is stored ``(S, S, C)``,
    placed by the build rule ``array`` and cropped by the loader rule ``array``. ``key``
    names the ``.npz`` member or ``.mat`` variable to read when a file holds several
    (``--key``).
    """

    name = "array"
    source = "file"
    decoder = "array"
    options = MappingProxyType(
        {
            "shape": Option(REQUIRED, check_shape),
            "dtype": Option(REQUIRED, check_dtype),
            "spatial": Option(False, _flag),
            "key": Option(None, optional(_variable)),
        }
    )
    extensions = ARRAY_EXTENSIONS  # class folders and path,label manifests
    beside = (
        "a folder whose first file is a .tif is read as images: for cubes give --fields with "
        "kind 'array' (docs/arrays.md)"
    )
    flags = MappingProxyType(
        {"key": Flag("key", "Array files: the .npz member or .mat variable to read.")}
    )

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """A spatial array is ``[H, W, C]``."""
        if opts["spatial"] and len(opts["shape"]) != 3:
            raise SpecError(
                f"fields.{field}.shape is {list(opts['shape'])}; a spatial array is [H, W, C]"
            )

    def rules(self, opts: Mapping[str, Any]) -> tuple[bool, str, str]:
        """``(True, "array", "array")`` for a spatial array, else untouched (``none``)."""
        if opts["spatial"]:
            return True, "array", "array"
        return False, "none", "none"

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """The declared shape (``(S, S, C)`` when spatial) and dtype, holes zero."""
        shape = tuple(opts["shape"])
        return Storage((*size_hw(size), shape[2]) if opts["spatial"] else shape, opts["dtype"], 0)

    def float_scale(self, opts: Mapping[str, Any]) -> float:
        """Values cast as they are (a loader's ``dtype=``), as an augment's ``bands=None``."""
        return 1.0

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An array of the declared shape and dtype (:func:`values.exact_array`)."""
        return values.exact_array(value, tuple(opts["shape"]), opts["dtype"])


def decode_npy(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """A ``.npy`` file (no pickles): the decoder ``npy``."""
    try:
        value = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DecodeError(key, f"field {field.name!r}: not a .npy array ({exc})") from None
    if not isinstance(value, np.ndarray):  # an .npz archive
        value.close()
        raise DecodeError(key, f"field {field.name!r}: an .npz archive, not one .npy array")
    return value


def _accepts(q: SourceQuery) -> bool:
    """Array files (by the first file's extension), or array fields over a non-field source."""
    if is_array_source(q.src, q.text):
        return True
    return bool(q.fields) and is_array_fields(q.fields) and not field_columns(q.src, q.text)


def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
    return infer_array_fields(q.src, q.options, q.text)


def _list(q: SourceQuery) -> FieldSource:
    return list_array_fields(q.src, q.fields, q.on_error, q.text)


if not has_kind("array"):
    register_kind(ArrayKind())
for _name, _decoder in (("npy", decode_npy), ("array", decode_patch)):
    if _name not in DECODE:
        register_decoder(_name, _decoder)
if "array" not in PLACE:
    register_rule("array", place_array)
if "arrays" not in SOURCE_READERS:
    register_source(SourceReader("arrays", _accepts, _infer, _list))
