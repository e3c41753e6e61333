"""The ``image`` kind: ``(H, W, C)`` pixels, C = 1 or 3, 8 bits (uint8) or 16 (uint16).

Decoded by the v1 decoding rules (decoder ``image``: :func:`decode_image`), placed bilinear
by the build (rule ``bilinear``: :func:`place_image`, Pillow's filter, as in format v1),
cropped bilinear by the loader (``loaders.augment.rules.crop_images``, registered by the
loader), jittered (``photometric``), blended by mixup and pasted by CutMix. The frame of
every spatial field of a sample is the first image's (``precompute.fields.spec.frame_field``).

Options: ``channels`` (3, or 1: grey), ``fill`` (the letterbox padding, 0-255; times 257 at
16 bits) and ``bit_depth`` (8, or 16: a 16-bit grey source keeps its values, an 8-bit one is
stored ``v * 257``). The decoder gives the source's own pixels (grey sources one channel,
16-bit grey as uint16: :func:`~precompute.stages.decode.decode_pixels`) and :meth:`ImageKind.
check` gives them the field's channels and depth
(:func:`~precompute.stages.decode.conform_pixels`), so a transform run on the decoded sample
(``docs/transforms.md``) sees them as the source has them. A grey source stored as 3 channels
is noted (``grey_as_rgb``: ``--channels 1`` stores it in a third of the bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from precompute.checks import Size, size_hw
from precompute.errors import SpecError
from precompute.fields.assemble import DECODE, register_decoder
from precompute.fields.base import Kind, Storage
from precompute.fields.geometry import PLACE, Placement, register_rule
from precompute.fields.options import ColumnClaim, Flag, Option, SuffixClaim, integer
from precompute.fields.registry import has_kind, register_kind
from precompute.fields.spec import FieldSpec
from precompute.notes import note
from precompute.policy import show
from precompute.sources.folders import IMAGE_EXTENSIONS, IMAGE_SUFFIXES
from precompute.stages.decode import LOW_BITS, conform_pixels, decode_pixels
from precompute.stages.resize import FILTER

__all__ = ["ImageKind", "decode_image", "place_image"]


def _choice(*allowed: int) -> Any:
    """A checker of one of ``allowed`` integers, given as a number or its text (a flag's)."""

    def check(where: str, value: Any) -> int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or value not in allowed:
            raise SpecError(f"{where} must be one of {list(allowed)}, got {show(value)}")
        return int(value)

    return check


class ImageKind(Kind):
    """``(H, W, C)`` pixels, C = 1 or 3, uint8 or uint16: resized bilinear, jittered, mixed."""

    name = "image"
    source = "file"
    decoder = "image"
    spatial = True
    resample = augment = "bilinear"
    photometric = True
    mixup, cutmix = "blend", "paste"
    codecs = ("zstd", "jpeg")  # pixels survive a lossy codec; masks, points, boxes do not
    extensions = tuple(sorted(IMAGE_EXTENSIONS))  # class folders and path,label manifests
    columns = ColumnClaim(("binary",), priority=10)  # any binary column a mask does not name
    suffixes = SuffixClaim((";".join(IMAGE_SUFFIXES),), priority=10)  # jpg;png: those present
    options = MappingProxyType(
        {
            "channels": Option(3, _choice(1, 3)),
            "fill": Option(0, integer(0, 255)),
            "bit_depth": Option(8, _choice(8, 16), late=True),
        }
    )
    flags = MappingProxyType(
        {
            "channels": Flag(
                "channels",
                "Images: 3 (default) | 1 (grey); audio: mono (default) | N.",
                shared=True,
            ),
            "bit_depth": Flag(
                "bit_depth", "Images: 8 (uint8, default) | 16 (uint16: 16-bit sources kept)."
            ),
        }
    )
    hint = "on the command line: --channels, --bit-depth or --fields"

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``(H, W, C)`` uint8 (uint16 at 16 bits), holes black."""
        dtype = "uint16" if opts.get("bit_depth", 8) == 16 else "uint8"
        return Storage((*size_hw(size), opts["channels"]), dtype, 0)

    def describe(self, opts: Mapping[str, Any], size: Size) -> str:
        """``image 224 px`` (``512x384 px``; ``grey`` with one channel; ``16-bit``)."""
        grey = " grey" if opts["channels"] == 1 else ""
        return f"image {size} px{grey}" + (" 16-bit" if opts.get("bit_depth", 8) == 16 else "")

    def pad(self, opts: Mapping[str, Any]) -> int:
        """The ``fill`` option (times 257 at 16 bits: 255 is white at either depth)."""
        return int(opts["fill"]) * (257 if opts.get("bit_depth", 8) == 16 else 1)

    def float_scale(self, opts: Mapping[str, Any]) -> float:
        """Pixels as floats in [0, 1] (a loader's ``dtype=``): 1/255, or 1/65535 at 16 bits."""
        return 1.0 / (65535.0 if opts.get("bit_depth", 8) == 16 else 255.0)

    def note_holds(self, name: str, before: Any, after: Any) -> bool:
        """``grey_as_rgb``: the output still grey; ``gray_low_bits``: still as dark, same depth.

        ``grey_as_rgb`` holds while the transform's pixels are one channel or three equal
        ones. ``gray_low_bits`` holds while they keep the depth they were given and every
        pixel that was dark (below 4096 of a uint16 source; 16 of 255 once stored at 8
        bits) still is: a transform that rescales the values (CLAHE, a window to 8 bits)
        withdraws it.
        """
        if not isinstance(after, np.ndarray) or not isinstance(before, np.ndarray):
            return True
        if name == "grey_as_rgb":
            return (
                after.ndim == 2
                or after.shape[-1] == 1
                or bool((after[..., 1:] == after[..., :1]).all())
            )
        if name == "gray_low_bits":  # at 8 bits, 4095 / 257 is 16 (the letterbox fill aside)
            dark = LOW_BITS - 1 if before.dtype == np.uint16 else (LOW_BITS - 1) // 257 + 1
            kept = after[before <= dark] if after.shape == before.shape else after
            return after.dtype == before.dtype and int(kept.max(initial=0)) <= dark
        return True

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """``(H, W[, 1 | 3])`` uint8/uint16 pixels as ``(H, W, channels)`` of the bit depth."""
        return conform_pixels(value, opts["channels"], opts.get("bit_depth", 8))


def decode_image(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """The v1 decoding rules, grey sources one channel and 16-bit grey kept (``decode_pixels``).

    Notes (:mod:`precompute.notes`): a grey source stored as 3 channels (``grey_as_rgb``), a
    16-bit source whose values all stay below 4096 stored at 8 bits (``gray_low_bits``: dark).
    """
    pixels = decode_pixels(data, key, max_pixels)
    if pixels.shape[2] == 1 and field.options["channels"] == 3:
        note("grey_as_rgb", key)
    eight = field.options.get("bit_depth", 8) == 8
    if eight and pixels.dtype == np.uint16 and 0 < int(pixels.max()) < LOW_BITS:
        note("gray_low_bits", key)
    return pixels


def _resized(plane: np.ndarray, p: Placement) -> np.ndarray:
    """One ``(H, W)`` plane (uint8: ``L``, uint16: ``I;16``) resized bilinear by ``p``."""
    img = Image.fromarray(plane)  # uint8: L, uint16: I;16
    return np.asarray(img.resize(p.out, FILTER, box=p.box), dtype=plane.dtype)


def place_image(pixels: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Resize ``(H, W, C)`` pixels (C = 1 or 3, uint8 or uint16) bilinear into the stored frame.

    uint8 RGB is resized as one Pillow ``RGB`` image (format v1's bytes); grey and 16-bit
    pixels plane by plane (Pillow resizes ``I;16`` in 16 bits), with the same filter.
    """
    c = pixels.shape[2]
    out = np.full((*p.shape, c), pad, dtype=pixels.dtype)
    if pixels.dtype == np.uint8 and c == 3:
        img = Image.fromarray(pixels, "RGB")
        resized = np.asarray(img.resize(p.out, FILTER, box=p.box), dtype=np.uint8)
    else:
        resized = np.stack([_resized(np.ascontiguousarray(pixels[..., k]), p) for k in range(c)], 2)
    top, left, h, w = p.extent
    out[top : top + h, left : left + w] = resized.reshape(h, w, c)
    return out


if not has_kind("image"):
    register_kind(ImageKind())
if "image" not in DECODE:
    register_decoder("image", decode_image)
if "bilinear" not in PLACE:
    register_rule("bilinear", place_image)
