"""Decode a mask file into class ids (``(H, W)`` integers), checked against its field.

Rules:

- The same header guard as images (``max_pixels``) and EXIF orientation.
- JPEG masks are an error: JPEG is lossy, so the class ids blur into other values at every
  edge (and a blurred value that happens to be a valid id would pass unnoticed); save masks
  as PNG.
- Palette (``P``) masks: the palette index of each pixel is its class id (the colours and any
  transparency are ignored). Grey masks (``L``, ``I;16``, ``I``, ``1``): the value is the id.
- ``RGB``/``RGBA`` masks need the field's ``colormap`` (one ``[r, g, b]`` per class id; alpha
  is ignored); a colour not in it is an error naming the colour. Without a colour map an RGB
  mask is an error: its colours are not class ids. A grey ``L`` mask with a ``colormap`` goes
  through it as the colour ``(v, v, v)``: a binary 0/255 mask is ``classes: 2, colormap:
  [[0, 0, 0], [255, 255, 255]]`` (``--mask-classes 2 --colormap '[[0,0,0],[255,255,255]]'``).
- A grey ``L`` mask of a 2-class field holding only 0 and 255 while 255 is the
  ``ignore_index`` (and no colour map) is an error: it looks binary, and every foreground
  pixel would be ignored. (With more classes, 0 and 255 only is a mask with background and
  ignored pixels, and is read as such.)
- Any other mode (``LA``, ``CMYK``, float ``F``) is an error.
- Values outside ``0..classes-1`` other than ``ignore_index`` are an error naming them.

Every failure is a :class:`~precompute.errors.DecodeError` naming the key and the field: a
per-input error that the build's ``on_error`` policy handles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from precompute.errors import DecodeError
from precompute.fields.spec import FieldSpec
from precompute.stages.decode import _open_checked

__all__ = ["decode_mask", "mask_ids"]

_ID_MODES = frozenset({"P", "L", "1", "I;16", "I;16L", "I;16B", "I;16N", "I"})
_RGB_MODES = frozenset({"RGB", "RGBA"})
_LOSSY = frozenset({"JPEG", "MPO"})
BINARY_HINT = (
    "a grey mask of only 0 and 255 looks binary, and 255 is the ignore_index: every "
    "foreground pixel would be ignored; map 255 to class 1 with --mask-classes 2 --colormap "
    "'[[0,0,0],[255,255,255]]' (or re-save the mask with ids 0/1)"
)


def _by_colour(rgb: np.ndarray, table: Sequence[Sequence[int]]) -> np.ndarray:
    """Class ids of an ``(H, W, 3)`` uint8 image through a colour table; ``ValueError`` else."""
    packed = (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8)
    packed |= rgb[..., 2]
    colours, inverse = np.unique(packed, return_inverse=True)
    lookup = {(r << 16) | (g << 8) | b: i for i, (r, g, b) in enumerate(table)}
    missing = [int(c) for c in colours if int(c) not in lookup]
    if missing:
        c = missing[0]
        raise ValueError(
            f"colour ({c >> 16}, {(c >> 8) & 255}, {c & 255}) is not in the colormap "
            f"({len(missing)} unknown colour(s))"
        )
    ids = np.asarray([lookup[int(c)] for c in colours], dtype=np.int64)
    out: np.ndarray = ids[inverse.reshape(packed.shape)]
    return out


def _looks_binary(ids: np.ndarray, opts: Mapping[str, Any]) -> bool:
    """Whether a 2-class mask holds 0 and 255 (its ignore index), and nothing else."""
    if opts["classes"] != 2 or opts["ignore_index"] != 255:
        return False
    present = np.unique(ids)
    return len(present) == 2 and present[0] == 0 and present[1] == 255


def mask_ids(img: Image.Image, field: FieldSpec) -> np.ndarray:
    """Return the class ids of a decoded mask image (rules in the module docstring).

    Raises:
        ValueError: The mode holds no class ids, an RGB mask without a colour map, or a
            colour not in it.
    """
    table = field.options.get("colormap")
    if img.mode == "L" and table is not None:
        return _by_colour(np.asarray(img.convert("RGB")), table)
    if img.mode in _ID_MODES:
        ids = np.asarray(img).astype(np.int64)
        if img.mode == "L" and _looks_binary(ids, field.options):
            raise ValueError(BINARY_HINT)
        return ids
    if img.mode in _RGB_MODES and table is not None:
        return _by_colour(np.asarray(img.convert("RGB")), table)
    if img.mode in _RGB_MODES:
        raise ValueError(
            f"an {img.mode} mask needs a colormap (one [r, g, b] per class); save masks as "
            "palette (P) or grey (L) images of class ids, or declare the colormap"
        )
    raise ValueError(f"mask mode {img.mode} holds no class ids (use P, L, I;16, or RGB)")


def decode_mask(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """Decode the mask file ``key`` into ``(H, W)`` class ids of the field's storage dtype.

    Raises:
        DecodeError: Not an image, over ``max_pixels``, no class ids, or values outside the
            declared classes; the message names the key and the field.
    """
    img = _open_checked(data, key, max_pixels)
    if img.format in _LOSSY:
        raise DecodeError(
            key,
            f"field {field.name!r} (mask): a {img.format} mask is lossy (its class ids blur "
            "into other values at every edge); save masks as PNG",
        )
    try:
        img.load()
        img = ImageOps.exif_transpose(img)
        ids = mask_ids(img, field)
    except ValueError as exc:
        raise DecodeError(key, f"field {field.name!r} (mask): {exc}") from None
    except Exception as exc:  # truncated or corrupt data, bad EXIF, ...
        raise DecodeError(key, f"cannot decode ({type(exc).__name__}: {exc})") from exc
    return field.spec.validate(ids, field.name, field.options, key)
