"""Read one array file: ``.npy``, ``.npz``, ``.tif``/``.tiff`` stacks and ``.mat`` (v5, v7.3).

:func:`read_array` is the decoder of an ``array`` field's file: the extension of the file's
name picks the reader, the value comes back with its dtype and values exactly as stored.

* ``.npy``: no pickles (object arrays are refused).
* ``.npz``: the array named ``array_key``, or the only one; several without a name, or a
  name that is not there, are refused listing the names found.
* ``.tif``/``.tiff`` (tifffile): always ``(H, W, C)``: a stack of 2-D pages gives one band
  per page, one page of ``(H, W, C)`` samples is kept as is, a single 2-D page is ``(H, W,
  1)``.
* ``.mat``: :mod:`precompute.arrays.matfiles` (v5 through scipy, v7.3 through h5py).

Sizes are checked before anything is read: a declared shape (``.npy`` header, ``.npz``
member header, TIFF series, ``.mat`` variable) of more than ``max_bytes`` is refused. NaN and
inf are refused by default, naming how many there are and where the first one is
(``allow_nonfinite=True`` keeps them). Every refusal is a
:class:`~precompute.errors.DecodeError` naming the file.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from precompute.arrays.checks import check_finite, guard_size, pick_one
from precompute.arrays.matfiles import read_mat
from precompute.errors import DecodeError
from precompute.fields.spec import FieldSpec
from precompute.sources.folders import ARRAY_EXTENSIONS
from precompute.sources.inputs import DEFAULT_MAX_BYTES

__all__ = ["ARRAY_EXTENSIONS", "READERS", "decode_array", "read_array"]


def _npy_header(key: str, stream: Any, what: str, max_bytes: int) -> None:
    """Check a ``.npy`` header's shape and dtype before the body is read."""
    try:
        version = np.lib.format.read_magic(stream)
        header = np.lib.format.read_array_header_1_0
        if version != (1, 0):
            header = np.lib.format.read_array_header_2_0
        shape, _, dtype = header(stream)
    except (ValueError, OSError, EOFError) as exc:
        raise DecodeError(key, f"{what} is not a .npy array ({exc})") from None
    if dtype.hasobject:
        raise DecodeError(key, f"{what} holds Python objects (pickles are not read)")
    guard_size(key, what, tuple(shape), dtype, max_bytes)


def _npy(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    _npy_header(key, io.BytesIO(data), "the file", max_bytes)
    try:
        return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))
    except (ValueError, OSError, EOFError) as exc:
        raise DecodeError(key, f"not a .npy array ({exc})") from None


def _npz(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = {n.removesuffix(".npy"): n for n in zf.namelist()}
            name = pick_one(key, sorted(members), array_key, "array")
            with zf.open(members[name]) as f:
                _npy_header(key, f, f"array {name!r}", max_bytes)
            with zf.open(members[name]) as f:
                # read_array reads the declared bytes only, whatever follows in the member
                return np.asarray(np.lib.format.read_array(f, allow_pickle=False))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise DecodeError(key, f"not a readable .npz archive ({exc})") from None


def _tiff_layout(key: str, shape: tuple[int, ...], axes: str) -> tuple[int, ...]:
    """The axis order that gives ``(H, W, C)`` from a TIFF series of ``axes``."""
    if len(shape) == 2:
        return (0, 1)
    if len(shape) == 3 and axes.endswith("YX"):
        return (1, 2, 0)  # pages (or separate sample planes) -> bands
    if len(shape) == 3 and axes.endswith("YXS"):
        return (0, 1, 2)
    raise DecodeError(key, f"TIFF series of shape {list(shape)} (axes {axes}) is not (H, W, C)")


def _tiff(data: bytes, key: str, array_key: str | None, max_bytes: int) -> np.ndarray:
    import tifffile

    try:
        with tifffile.TiffFile(io.BytesIO(data)) as tif:
            series = tif.series[0]
            order = _tiff_layout(key, tuple(series.shape), series.axes)
            guard_size(key, "the TIFF series", tuple(series.shape), series.dtype, max_bytes)
            value = series.asarray()
    except (tifffile.TiffFileError, ValueError, OSError, IndexError, EOFError) as exc:
        raise DecodeError(key, f"not a readable TIFF ({exc})") from None
    value = np.transpose(value, order)
    return value[:, :, None] if value.ndim == 2 else np.ascontiguousarray(value)


Reader = Callable[[bytes, str, "str | None", int], np.ndarray]
READERS: dict[str, Reader] = {
    ".npy": _npy,
    ".npz": _npz,
    ".tif": _tiff,
    ".tiff": _tiff,
    ".mat": read_mat,
}


def read_array(
    data: bytes,
    key: str,
    name_hint: str,
    array_key: str | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_nonfinite: bool = False,
) -> np.ndarray:
    """Return the array in the file bytes ``data``, dtype and values as stored.

    Args:
        data: The file's bytes.
        key: The input's key (named by every error).
        name_hint: The file's name; its extension picks the reader.
        array_key: The ``.npz`` member or ``.mat`` variable to read (needed when there are
            several).
        max_bytes: The largest array accepted, checked on the declared shape before reading.
        allow_nonfinite: Keep NaN/inf instead of refusing the file.

    Raises:
        DecodeError: An unknown extension, a malformed file, no such (or no single) array, an
            array over ``max_bytes``, or (by default) NaN/inf values.
    """
    ext = os.path.splitext(name_hint)[1].lower()
    if ext not in READERS:
        raise DecodeError(key, f"{ext or 'no extension'}: array files are {list(ARRAY_EXTENSIONS)}")
    value = READERS[ext](data, key, array_key, max_bytes)
    if value.dtype.kind not in "biuf":
        raise DecodeError(key, f"dtype {value.dtype} is not a real number type")
    return value if allow_nonfinite else check_finite(key, value)


def decode_array(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """:func:`read_array` with the signature of ``precompute.fields.assemble.DECODE``.

    The file's key names it and gives its extension; the field's option ``key`` names the
    ``.npz`` member or ``.mat`` variable. ``max_pixels`` is unused: arrays are bounded by the
    input's ``max_bytes``.

    Raises:
        DecodeError: :func:`read_array`'s, naming the file and the field.
    """
    try:
        return read_array(data, key, key, field.options.get("key"))
    except DecodeError as exc:
        raise DecodeError(key, f"field {field.name!r}: {exc.reason}") from None
