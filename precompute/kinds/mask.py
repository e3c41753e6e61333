"""The ``mask`` kind: ``(H, W)`` class ids, and the segmentation folder that holds masks.

Decoded by :func:`precompute.fields.masks.decode_mask` (decoder ``mask``: palette, grey or a
colour map to class ids), placed nearest by the build (rule ``nearest``: :func:`place_mask`,
exact integer arithmetic, padding ``ignore_index``), cropped nearest by the loader
(``loaders.augment.rules.crop_masks``), pasted by CutMix with the image's box, never blended.
Flags: ``--mask-classes``, ``--ignore-index``, ``--colormap``. A **segmentation folder**
(``SRC/images/`` + ``SRC/masks/``, paired by name) is read by this module's source reader as
the fields ``image`` + ``mask``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size, size_hw
from precompute.errors import SpecError
from precompute.fields import FieldSpec, values
from precompute.fields.assemble import DECODE, register_decoder
from precompute.fields.base import ClassCounts, Kind, Storage, class_counts_of
from precompute.fields.geometry import PLACE, Placement, register_rule
from precompute.fields.masks import decode_mask
from precompute.fields.options import (
    REQUIRED,
    ColumnClaim,
    Flag,
    Option,
    SuffixClaim,
    check_count,
    check_rgb_table,
    integer,
    optional,
)
from precompute.fields.registry import has_kind, register_kind
from precompute.kinds.hooks import SOURCE_READERS, SourceQuery, SourceReader, register_source
from precompute.sources.fields import FieldSource, is_segmentation, list_segmentation
from precompute.sources.folders import IMAGE_SUFFIXES
from precompute.sources.named import named_fields

__all__ = ["CLI_HINT", "MASK_NAMES", "SEGMENTATION_FIELDS", "MaskKind", "place_mask"]

CLI_HINT = "on the command line: --mask-classes N (and --ignore-index, --colormap) or --fields"
SEGMENTATION_FIELDS = ("image", "mask")  # the fields of a segmentation folder
# Names of a packed source's mask: a binary Parquet column, a WebDataset member NAME.png.
MASK_NAMES = ("mask", "segmentation", "seg", "annotation", "label")


class MaskKind(Kind):
    """``(H, W)`` class ids: resized nearest only, padded ``ignore_index``, pasted by CutMix."""

    name = "mask"
    source = "file"
    decoder = "mask"
    spatial = True
    resample = augment = "nearest"
    cutmix = "paste"
    stores_class_counts = True
    options = MappingProxyType(
        {
            "classes": Option(REQUIRED, check_count),
            "ignore_index": Option(255, integer(0, 65535)),
            "colormap": Option(None, optional(check_rgb_table)),
        }
    )
    flags = MappingProxyType(
        {
            "mask_classes": Flag(
                "classes",
                "Segmentation: the mask's class count (ids 0..N-1); needed for images/ + masks/.",
                int,
            ),
            "ignore_index": Flag(
                "ignore_index", "Mask id of padding and holes (default 255).", int
            ),
            "colormap": Flag(
                "colormap", "RGB masks: JSON list of [r, g, b] per class id.", json=True
            ),
        }
    )
    hint = CLI_HINT
    columns = ColumnClaim(("binary",), MASK_NAMES, priority=20)  # by name: before the image
    suffixes = SuffixClaim(
        tuple(sorted(f"{n}.{ext}" for n in MASK_NAMES for ext in IMAGE_SUFFIXES)),
        pick="each",
        priority=20,
    )

    def describe(self, opts: Mapping[str, Any], size: Size) -> str:
        """``mask 4 classes``."""
        return f"mask {opts['classes']} classes"

    def cross_check(self, field: str, opts: Mapping[str, Any]) -> None:
        """``ignore_index`` is no class id; a colour map has one colour per class."""
        if opts["ignore_index"] < opts["classes"]:
            raise SpecError(
                f"fields.{field}.ignore_index {opts['ignore_index']} is a class id "
                f"(classes: {opts['classes']}); use a value >= classes"
            )
        table = opts["colormap"]
        if table is not None and len(table) != opts["classes"]:
            raise SpecError(
                f"fields.{field}.colormap has {len(table)} colours for "
                f"{opts['classes']} classes; give one [r, g, b] per class"
            )

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``(S, S)`` uint8 (uint16 beyond 255), holes and padding ``ignore_index``."""
        wide = max(opts["classes"] - 1, opts["ignore_index"]) > 255
        return Storage(size_hw(size), "uint16" if wide else "uint8", opts["ignore_index"])

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """An ``(H, W)`` integer array of class ids below ``classes`` or ``ignore_index``."""
        dtype = self.storage(opts, 1).dtype
        return values.class_ids(value, opts["classes"], opts["ignore_index"], dtype)

    def class_counts(self, stored: np.ndarray, opts: Mapping[str, Any]) -> ClassCounts:
        """Each sample's pixels per class (``ignore_index`` and padding count nothing).

        Masks are read chunk by chunk, so the build counts them (``stores_class_counts``).
        """
        classes = opts["classes"]
        flat = np.asarray(stored).reshape(len(stored), -1).astype(np.int64)
        keep = flat < classes
        offsets = (np.arange(len(flat), dtype=np.int64) * classes)[:, None]
        dense = np.bincount((flat + offsets)[keep], minlength=len(flat) * classes)
        return class_counts_of(dense.reshape(len(flat), classes))

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Every stored value is a class id or ``ignore_index``."""
        flat = stored.reshape(-1, stored.shape[-1]) if stored.size else stored.reshape(1, 1)
        values.class_ids(flat, opts["classes"], opts["ignore_index"], str(stored.dtype))


def _nearest(start2: int, length: int, n: int) -> np.ndarray:
    """Source indices of ``n`` output pixels over ``[start2 / 2, start2 / 2 + length)``.

    Output pixel ``j`` takes ``floor(start + (j + 0.5) * length / n)``, all in integers.
    """
    j = np.arange(n, dtype=np.int64)
    return (start2 * n + (2 * j + 1) * length) // (2 * n)


def place_mask(mask: np.ndarray, p: Placement, pad: Any) -> np.ndarray:
    """Resize an ``(H, W)`` mask nearest-neighbour into the stored frame, padding ``pad``."""
    left, top, right, bottom = p.box
    rows = _nearest(round(2 * top), round(bottom - top), p.out[1]).clip(0, p.frame[1] - 1)
    cols = _nearest(round(2 * left), round(right - left), p.out[0]).clip(0, p.frame[0] - 1)
    out = np.full(p.shape, pad, dtype=mask.dtype)
    t, lf, h, w = p.extent
    out[t : t + h, lf : lf + w] = mask[rows[:, None], cols[None, :]]
    return out


def _infer(q: SourceQuery) -> tuple[FieldSpec, ...]:
    what = f"{q.src} (a segmentation folder: images/ + masks/)"
    return named_fields(q.src, SEGMENTATION_FIELDS, q.options, q.fill, what)


def _list(q: SourceQuery) -> FieldSource:
    names = sorted(f.name for f in q.fields)
    if names != sorted(SEGMENTATION_FIELDS):
        raise SpecError(
            f"{q.src}: a segmentation folder has the fields image and mask; the spec names {names}"
        )
    return list_segmentation(q.src, q.on_error)


if not has_kind("mask"):
    register_kind(MaskKind())
if "mask" not in DECODE:
    register_decoder("mask", decode_mask)
if "nearest" not in PLACE:
    register_rule("nearest", place_mask)
if "segmentation" not in SOURCE_READERS:
    register_source(SourceReader("segmentation", lambda q: is_segmentation(q.src), _infer, _list))
