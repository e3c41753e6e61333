"""The ``boxes`` field kind: object detection boxes, a variable number per sample.

A sample's value is a list of rows ``[x0, y0, x1, y1, class]`` (pixels of the source image,
corners in the pixel-centre convention: a box over pixel columns ``a .. b - 1`` is ``x0 = a,
x1 = b``; ``class`` a class index). It is stored as ``(max_boxes, 5)`` float32, boxes first,
padding rows all ``-1`` (:data:`~precompute.kinds.boxes.place.PAD`), with the companion
``FIELD.count`` (``()`` int32) beside it. Options:

* ``classes``: the class count (learned from the source when left out: the largest class
  index + 1; a COCO file gives its categories);
* ``max_boxes``: the rows stored per sample (learned when left out: the most boxes of any
  sample); a sample with more boxes is an error naming the input and both counts;
* ``min_visibility`` (default 0.1, the kept-area threshold of YOLOv5's augmentations,
  ``box_candidates(area_thr=0.1)``): the cut rule's threshold, for the build's placement and
  the loader's crop alike: a box clipped by a crop is dropped when it keeps less than this
  fraction of its area (:mod:`precompute.kinds.boxes.place`);
* ``images``: a COCO source's images folder (``--images DIR``; default: the annotation
  file's folder, :mod:`precompute.kinds.boxes.coco`). A source setting: it names where the
  files are, like a scene's ``labels`` file, and is kept in the spec for a rebuild.

Importing this module (importing :mod:`precompute.kinds.boxes` does; the kind registry
imports that, ``precompute.fields.registry.BUILTIN``) registers everything about the kind:
the kind; its build rule ``boxes`` (:func:`~precompute.kinds.boxes.place.place_boxes`: the
keypoints' exact map, the cut rule, survivors packed first); its loader rules ``boxes`` (crop
+ flip, quarter turns, mixup and CutMix: :mod:`precompute.kinds.boxes.batch`, torch, imported
when the loader first calls them); the COCO source reader
(:mod:`precompute.kinds.boxes.coco`); the ``precompute build`` flags ``--images``,
``--max-boxes`` and ``--min-visibility``. The count follows the rows wherever they move
(:meth:`BoxesKind.moved_companions`). Rules: ``docs/boxes.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from precompute.checks import Size
from precompute.errors import SpecError
from precompute.fields.base import ClassCounts, Kind, Storage, class_counts_of
from precompute.fields.geometry import PLACE, register_rule
from precompute.fields.options import MAX_COUNT, Flag, Option, check_count, optional
from precompute.fields.registry import has_kind, register_kind
from precompute.fields.spec import FieldSpec
from precompute.kinds import hooks
from precompute.kinds.boxes import coco
from precompute.kinds.boxes.place import DEFAULT_MIN_VISIBILITY, PAD, count_of, place_boxes
from precompute.notes import note, register_note
from precompute.policy import show
from precompute.sources.fields import FieldSource

__all__ = ["DEFAULT_MIN_VISIBILITY", "OUTSIDE", "BoxesKind", "parse_boxes"]

_SHOWN = 60  # characters of a bad value named in a message


def _fraction(where: str, value: Any) -> float:
    """A number in ``[0, 1]``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0.0 <= value <= 1.0:
        raise SpecError(f"{where} must be a number in [0, 1], got {show(value)}")
    return float(value)


def _folder(where: str, value: Any) -> str:
    """A folder path or URL (not checked here: the source lister names a missing one)."""
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise SpecError(f"{where} must be a folder path, got {show(value)}")
    return value


def _coordinate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"a box coordinate must be a finite number, got {show(value)}")
    return float(value)


def _class(value: Any) -> int:
    """A class index: an integer (a float with no fraction, as JSON writers give, too)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a box class must be an integer >= 0, got {show(value)}")
    return value


def parse_boxes(raw: Any) -> tuple[tuple[float, float, float, float, int], ...]:
    """Boxes from a JSON list (or its text) of ``[x0, y0, x1, y1, class]`` rows.

    An empty list is a sample without boxes. ``ValueError`` names the bad row.
    """
    doc = raw
    if isinstance(raw, str):
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            raise ValueError(f"boxes are not JSON: {show(raw)[:_SHOWN]}") from None
    if not isinstance(doc, list | tuple):
        raise ValueError(f"boxes must be a list of [x0, y0, x1, y1, class], got {show(doc)}")
    out = []
    for i, row in enumerate(doc):
        if not isinstance(row, list | tuple) or len(row) != 5:
            raise ValueError(f"box {i} must be [x0, y0, x1, y1, class], got {show(row)}")
        x0, y0, x1, y1 = (_coordinate(v) for v in row[:4])
        out.append((x0, y0, x1, y1, _class(row[4])))
    return tuple(out)


def _rows(value: Any) -> np.ndarray:
    """``(N, 5)`` float64 rows of a parsed value (a tuple of rows, or an array of them)."""
    a = np.asarray(value, dtype=np.float64)
    if a.size == 0:
        return np.zeros((0, 5), dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 5:
        raise ValueError(f"expected (N, 5) boxes [x0, y0, x1, y1, class], got shape {a.shape}")
    return a


def _check_rows(rows: np.ndarray, classes: int | None) -> None:
    """Check every row of ``(N, 5)`` float64 ``rows`` (``ValueError`` naming the first bad one)."""
    bad_class = (rows[:, 4] < 0) | (rows[:, 4] != np.floor(rows[:, 4]))
    if classes is not None:
        bad_class |= rows[:, 4] >= classes
    checks = (
        (~np.isfinite(rows).all(axis=1), "a value is not finite"),
        (bad_class, f"the class is not an index in [0, {classes})"),
        (rows[:, 0] >= rows[:, 2], "x0 >= x1 (no width)"),
        (rows[:, 1] >= rows[:, 3], "y0 >= y1 (no height)"),
    )
    for bad, why in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"box {i} {show(rows[i].tolist())}: {why}")


class BoxesKind(Kind):
    """``(max_boxes, 5)`` float32 ``[x0, y0, x1, y1, class]`` rows, count beside: mapped exactly.

    Inline (a manifest's ``boxes`` column, or a COCO file's annotations), spatial: placed by
    the build rule ``boxes`` and moved by the loader rule ``boxes``; never photometric.
    """

    name = "boxes"
    source = "inline"
    spatial = True
    resample = augment = "boxes"
    mixup, cutmix = "boxes", "boxes"
    options = MappingProxyType(
        {
            "classes": Option(None, optional(check_count)),
            "max_boxes": Option(None, optional(check_count)),
            "min_visibility": Option(DEFAULT_MIN_VISIBILITY, _fraction),
            "images": Option(None, optional(_folder)),
        }
    )
    flags = MappingProxyType(
        {
            "images": Flag("images", "COCO file: the folder of its file_names (default: its own)."),
            "max_boxes": Flag(
                "max_boxes", "Boxes: rows stored per sample (default: the most).", int
            ),
            "min_visibility": Flag(
                "min_visibility", "Boxes: area fraction a cut box keeps (default 0.1).", float
            ),
        }
    )
    hint = "on the command line: --max-boxes N, --min-visibility F (and --images DIR) or --fields"

    def storage(self, opts: Mapping[str, Any], size: Size) -> Storage:
        """``(max_boxes, 5)`` float32; padding rows and holes all -1."""
        if opts["max_boxes"] is None:
            raise SpecError(
                "boxes storage needs the most boxes a sample holds: set option 'max_boxes' "
                "(a build learns it from the source)"
            )
        return Storage((opts["max_boxes"], 5), "float32", PAD)

    def companions(self, opts: Mapping[str, Any], size: Size) -> Mapping[str, Storage]:
        """``count``: the boxes of each sample (its first ``count`` rows), 0 for a hole."""
        return {"count": Storage((), "int32", 0)}

    def moved_companions(self, value: Any, opts: Mapping[str, Any]) -> Mapping[str, Any]:
        """``count``: the rows that are boxes (the placement, a crop or a mix moves it)."""
        return {"count": (value[..., 4] >= 0).sum(-1)}

    def class_counts(self, stored: np.ndarray, opts: Mapping[str, Any]) -> ClassCounts:
        """Each sample's boxes per class (padding rows count nothing)."""
        cls = np.asarray(stored)[..., 4].reshape(len(stored), -1)
        samples, rows = np.nonzero(cls >= 0)
        classes = cls[samples, rows].astype(np.int64)
        top = opts["classes"] or int(classes.max(initial=-1)) + 1
        dense = np.zeros((len(stored), max(top, 1)), np.int64)
        np.add.at(dense, (samples, classes), 1)
        return class_counts_of(dense)

    def pad(self, opts: Mapping[str, Any]) -> float:
        """``min_visibility``, which the build hands to the placement rule as its ``pad``.

        Boxes are never padded; the cut rule's threshold is the one value the placement
        needs besides the placement.
        """
        return float(opts["min_visibility"])

    def check(self, value: Any, opts: Mapping[str, Any]) -> np.ndarray:
        """``(max_boxes, 5)`` float64 rows, padded: the placement maps them and rounds once.

        Each box has finite corners with ``x0 < x1`` and ``y0 < y1`` and a class index below
        ``classes``; a sample holds at most ``max_boxes`` boxes.
        """
        rows = _rows(value)
        top = opts["max_boxes"]
        if top is not None and len(rows) > top:
            raise ValueError(f"{len(rows)} boxes, more than max_boxes {top}")
        _check_rows(rows, opts["classes"])
        out = np.full((top if top is not None else len(rows), 5), PAD, dtype=np.float64)
        out[: len(rows)] = rows
        return out

    def learn(self, opts: Mapping[str, Any], found: Sequence[Any]) -> dict[str, Any]:
        """``max_boxes``: the most boxes of a sample; ``classes``: the largest class + 1."""
        learned: dict[str, Any] = {}
        limit = MAX_COUNT  # of both options (check_count)
        if opts["max_boxes"] is None and found:
            learned["max_boxes"] = max(1, max(len(v) for v in found))
            if learned["max_boxes"] > limit:
                raise SpecError(
                    f"a sample of the source has {learned['max_boxes']:,} boxes; a store holds "
                    f"at most {limit:,} a sample (max_boxes, learned as the most of a sample)"
                )
        if opts["classes"] is None and found:
            top = max((int(row[4]) for v in found for row in v), default=0)
            learned["classes"] = top + 1
            if top >= limit:
                raise SpecError(
                    f"a box of the source has class {top:,}; classes are 0 to {limit - 1:,} "
                    "(the class count is learned as the largest class + 1)"
                )
        return learned

    def check_stored(self, stored: np.ndarray, opts: Mapping[str, Any]) -> None:
        """Per sample: boxes first (valid rows), then padding rows all -1."""
        for i, sample in enumerate(stored.reshape(-1, *stored.shape[-2:])):
            n = count_of(sample)
            if not (sample[n:] == PAD).all():
                raise ValueError(f"sample {i}: a box after a padding row, or a partial pad row")
            _check_rows(sample[:n].astype(np.float64), opts["classes"])  # float32 on disk

    def parse_inline(self, raw: Any) -> Any:
        """A JSON list (or its text) of ``[x0, y0, x1, y1, class]`` (:func:`parse_boxes`)."""
        return parse_boxes(raw)

    def placed(
        self, key: str, value: np.ndarray, stored: np.ndarray, frame: tuple[int, int]
    ) -> None:
        """Note a sample with a box wholly outside its image (:data:`OUTSIDE`).

        Such a box is always left out (nothing of it is in the image): likely an annotation
        of another image size or orientation (a COCO file's ``width``/``height`` that are not
        those of the image as decoded, EXIF orientation applied).
        """
        w, h = frame
        rows = value[value[:, 4] >= 0]
        outside = (rows[:, 2] <= 0) | (rows[:, 3] <= 0) | (rows[:, 0] >= w) | (rows[:, 1] >= h)
        if outside.any():
            note(OUTSIDE, key)


# -- registration: the kind, its build rule, its loader rules, its source reader -------------


def _crop(values: Any, crops: Any, size: Any, options: Any) -> Any:
    from precompute.kinds.boxes.batch import crop_boxes  # torch: the loader's, never the build's

    return crop_boxes(values, crops, size, options)


def _turn(values: Any, k: Any, size: int) -> Any:
    from precompute.kinds.boxes.batch import rot90_boxes

    return rot90_boxes(values, k, size)


def _mix(values: Any, field: FieldSpec, draw: Any) -> Any:
    from precompute.kinds.boxes.batch import mix_boxes

    return mix_boxes(values, field, draw)


def _accepts(query: hooks.SourceQuery) -> bool:
    return coco.is_coco(query.src)


def _infer(query: hooks.SourceQuery) -> tuple[FieldSpec, ...]:
    return coco.coco_fields(query.src, query.options, query.fill, keep=True)


def _list(query: hooks.SourceQuery) -> FieldSource:
    return coco.list_coco(query.src, query.fields, query.on_error)


OUTSIDE = "boxes_outside"
register_note(
    OUTSIDE,
    "boxes wholly outside the image (annotations of another image size or orientation?): "
    "left out; coordinates are pixels of the image as decoded, EXIF orientation applied "
    "(docs/FORMAT.md)",
)
if not has_kind("boxes"):
    register_kind(BoxesKind())
if "boxes" not in PLACE:
    register_rule("boxes", place_boxes)
if "boxes" not in hooks.LOADER_RULES:
    hooks.register_loader_rule("boxes", _crop)
    hooks.register_rot90("boxes", _turn)
    hooks.register_mix_rule("mixup", "boxes", _mix)
    hooks.register_mix_rule("cutmix", "boxes", _mix)  # one function: called once per batch
if "coco" not in hooks.SOURCE_READERS:
    hooks.register_source(hooks.SourceReader("coco", _accepts, _infer, _list))
