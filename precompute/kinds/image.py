"""The ``image`` kind: ``(H, W, C)`` uint8 pixels, C = 1 or 3.

Decoded by the v1 decoding rules (decoder ``image``: :func:`decode_image`), placed bilinear
by the build (rule ``bilinear``: :func:`place_image`, Pillow's filter, as in format v1),
cropped bilinear by the loader (``loaders.augment.rules.crop_images``, registered by the
loader), jittered (``photometric``), blended by mixup and pasted by CutMix. The frame of
every spatial field of a sample is the first image's (``precompute.fields.spec.frame_field``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from precompute.fields import values
from precompute.fields.assemble import DECODE, register_decoder
from precompute.fields.base import Kind, Storage
from precompute.fields.geometry import PLACE, Placement, register_rule
from precompute.fields.options import ColumnClaim, Option, SuffixClaim, integer, one_of
from precompute.fields.registry import has_kind, register_kind
from precompute.fields.spec import FieldSpec
from precompute.sources.folders import IMAGE_EXTENSIONS, IMAGE_SUFFIXES
from precompute.stages.decode import decode_bytes
from precompute.stages.resize import FILTER

__all__ = ["ImageKind", "decode_image", "place_image"]


class ImageKind(Kind):
    """``(H, W, C)`` uint8 pixels, C = 1 or 3: resized bilinear, jittered, mixed."""

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
        {"channels": Option(3, one_of(1, 3)), "fill": Option(0, integer(0, 255))}
    )

    def storage(self, opts: Mapping[str, Any], size: int) -> Storage:
        """``(S, S, C)`` uint8, holes black."""
        return Storage((size, size, opts["channels"]), "uint8", 0)

    def describe(self, opts: Mapping[str, Any], size: int) -> str:
        """``image 224 px`` (``grey`` with one channel)."""
        return f"image {size} px" + (" grey" if opts["channels"] == 1 else "")

    def pad(self, opts: Mapping[str, Any]) -> int:
        """The ``fill`` option."""
        return int(opts["fill"])

    def float_scale(self, opts: Mapping[str, Any]) -> float:
        """Pixels as floats in [0, 1] (a loader's ``dtype=``)."""
        return 1.0 / 255.0

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An ``(H, W, channels)`` uint8 array."""
        return values.pixels(value, opts["channels"])


def decode_image(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """The v1 decoding rules to RGB; one channel: Pillow's ITU-R 601 grey of that RGB."""
    img = decode_bytes(data, key, max_pixels)
    return np.asarray(img if field.options["channels"] == 3 else img.convert("L"))


def place_image(pixels: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Resize ``(H, W, C)`` uint8 pixels (C = 1 or 3) bilinear into the stored frame."""
    c = pixels.shape[2]
    img = Image.fromarray(pixels[..., 0] if c == 1 else pixels, "L" if c == 1 else "RGB")
    out = np.full((p.size, p.size, c), pad, dtype=np.uint8)
    resized = np.asarray(img.resize(p.out, FILTER, box=p.box), dtype=np.uint8)
    top, left, h, w = p.extent
    out[top : top + h, left : left + w] = resized.reshape(h, w, c)
    return out


if not has_kind("image"):
    register_kind(ImageKind())
if "image" not in DECODE:
    register_decoder("image", decode_image)
if "bilinear" not in PLACE:
    register_rule("bilinear", place_image)
