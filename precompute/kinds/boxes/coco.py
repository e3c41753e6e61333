"""A COCO-style annotation file as a source of fields ``image`` + ``boxes`` (object detection).

``precompute build instances.json --out DIR`` reads a JSON object with

* ``images``: ``{"id": int, "file_name": str, ...}``; ``file_name`` is relative to the
  annotation file's folder, or to the ``images`` option of the boxes field (``--images DIR``);
* ``annotations``: ``{"id": int, "image_id": int, "bbox": [x, y, w, h], "category_id": int,
  "iscrowd": 0 or 1, ...}``; ``bbox`` in pixels of the image, ``w`` and ``h`` > 0;
* ``categories``: ``{"id": int, "name": str}``.

Rules:

* **classes**: the categories sorted by id; a box's class is the index of its category in
  that order (ids 1, 3, 7 become classes 0, 1, 2), and the names are recorded in that order
  (the build report's ``classes.boxes``). The boxes field's ``classes`` is the category count.
* **boxes**: ``[x, y, w, h]`` becomes ``[x, y, x + w, y + h, class]``, in the order of the
  annotations in the file.
* **crowd** annotations (``iscrowd: 1``: one region over many objects) are left out, as the
  detection references of torchvision and detectron2 leave them out of training targets.
* An image **without annotations** is kept, with no boxes (count 0).
* **Bad entries**: a malformed image (no integer ``id``, no ``file_name``, a ``file_name``
  given twice) or annotation (an ``image_id`` or ``category_id`` that names nothing, a
  ``bbox`` that is not four finite numbers with ``w, h > 0``, an ``iscrowd`` other than 0
  or 1) is a per-input error: under ``on_error: raise`` a
  :class:`~precompute.errors.SourceError` naming the file and the
  image's or the annotation's id; under ``skip`` the image it belongs to is left out and
  recorded in ``skipped`` (an image with a bad box would teach a detector a false negative).
  A file that is not such an object, or a category table that is unusable (ids not unique
  integers, names not strings), is a :class:`SourceError` whatever the policy.
* A relative ``file_name`` whose symlinks lead out of the images folder is recorded in
  ``skipped``, as in any other source.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from precompute.errors import SourceError, SpecError
from precompute.fields import FieldSpec
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.folders import ESCAPES, escapes, same_file
from precompute.sources.listing import check_policy, is_url, per_input, read_kept
from precompute.sources.rows import read_text

__all__ = ["coco_fields", "is_coco", "list_coco", "read_coco"]

EXTENSION = ".json"
_KEPT: dict[str, Any] = {}  # the parsed file, from the CLI's field inference to the listing
Row = tuple[float, float, float, float, int]


class _Bad(ValueError):
    """A per-input error: the image ``key`` it belongs to, and why."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(why)
        self.key, self.why = key, why


def is_coco(src: str) -> bool:
    """Whether ``src`` names a COCO-style annotation file (a ``.json`` file)."""
    return src.lower().endswith(EXTENSION)


def read_coco(src: str, keep: bool = False) -> Mapping[str, Any]:
    """The parsed annotation file (kept for the next call with ``keep``: ``read_kept``).

    Raises:
        SourceError: Unreadable, not JSON, or not an object with ``images`` and
            ``annotations`` lists.
    """
    doc = read_kept(_KEPT, src, lambda: _parse(src), keep)
    return doc


def _parse(src: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(read_text(src))
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{src}: not a COCO annotation file: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not all(
        isinstance(doc.get(k), list) for k in ("images", "annotations")
    ):
        raise SourceError(
            f"{src}: not a COCO annotation file: needs an object with 'images' and "
            "'annotations' lists"
        )
    return doc


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def categories(src: str, doc: Mapping[str, Any]) -> tuple[dict[int, int], tuple[str, ...]]:
    """``({category id: class index}, names)``: the categories sorted by id.

    Raises:
        SourceError: No ``categories`` list, or an entry without a unique integer ``id`` and
            a string ``name``.
    """
    table = doc.get("categories")
    if not isinstance(table, list) or not table:
        raise SourceError(f"{src}: needs a non-empty 'categories' list of {{id, name}}")
    named: dict[int, str] = {}
    for i, cat in enumerate(table):
        ok = isinstance(cat, dict) and _int(cat.get("id")) and isinstance(cat.get("name"), str)
        if not ok or cat["id"] in named:
            raise SourceError(
                f"{src}: categories[{i}] must be {{id, name}} with a unique integer id, "
                f"got {json.dumps(cat)[:80]}"
            )
        named[cat["id"]] = cat["name"]
    ids = sorted(named)
    return {cid: i for i, cid in enumerate(ids)}, tuple(named[cid] for cid in ids)


def _file_name(image: Any, index: int) -> tuple[int, str]:
    """``(id, file_name)`` of ``images[index]``; ``_Bad`` if either is unusable."""
    ident = image.get("id") if isinstance(image, dict) else None
    key = f"image id {ident}" if _int(ident) else f"images[{index}]"
    if not _int(ident):
        raise _Bad(key, "an image needs an integer 'id'")
    name = image.get("file_name")
    if not isinstance(name, str) or not name.strip() or "\0" in name:
        raise _Bad(key, f"image id {ident} has no usable 'file_name' ({json.dumps(name)[:60]})")
    return ident, name if is_url(name) else name.replace("\\", "/")


def _crowd(ann: Mapping[str, Any]) -> bool:
    """Whether an annotation is a crowd region (``iscrowd``: 0 or 1, absent: 0)."""
    value = ann.get("iscrowd", 0)
    if isinstance(value, int) and value in (0, 1):  # true and false are 1 and 0 too
        return bool(value)
    raise ValueError(f"iscrowd must be 0 or 1, got {json.dumps(value)}")


def _box(ann: Mapping[str, Any], classes: Mapping[int, int]) -> Row:
    """``[x0, y0, x1, y1, class]`` of one annotation (``ValueError`` saying what is wrong)."""
    bbox: Any = ann.get("bbox")
    numbers = isinstance(bbox, list) and len(bbox) == 4
    numbers = numbers and all(isinstance(v, int | float) and not isinstance(v, bool) for v in bbox)
    if not numbers or not all(math.isfinite(v) for v in bbox):
        raise ValueError(f"bbox must be [x, y, w, h] of finite numbers, got {json.dumps(bbox)}")
    x, y, w, h = (float(v) for v in bbox)
    if w <= 0 or h <= 0:
        raise ValueError(f"bbox {json.dumps(bbox)} has no area (w and h must be > 0)")
    category: Any = ann.get("category_id")
    if not _int(category) or category not in classes:
        raise ValueError(f"category_id {json.dumps(category)} is not in 'categories'")
    return (x, y, x + w, y + h, classes[category])


def _images(
    src: str, doc: Mapping[str, Any], on_error: str, skipped: list[tuple[str, str]]
) -> dict[int, str]:
    """``{image id: file_name}`` of the usable images."""
    out: dict[int, str] = {}
    names: dict[str, int] = {}
    for index, image in enumerate(doc["images"]):
        try:
            ident, name = _file_name(image, index)
            file = same_file("", name)  # "./a/x.png" and "a/x.png" name one file
            if ident in out or file in names:
                first = ident if ident in out else names[file]
                raise _Bad(name, f"image id {ident}: id or file_name given twice (id {first})")
        except _Bad as bad:
            per_input(src, on_error, skipped, bad.key, bad.why)
            continue
        out[ident], names[file] = name, ident
    return out


def _annotations(
    src: str,
    doc: Mapping[str, Any],
    images: Mapping[int, str],
    classes: Mapping[int, int],
    policy: tuple[str, list[tuple[str, str]]],
) -> tuple[dict[int, list[Row]], dict[int, str]]:
    """``({image id: rows}, {image id: why})``: every usable image's boxes, or why not.

    An annotation of an image left out already is passed over; one whose ``image_id``
    names no image at all is a per-input error of its own (``policy``: ``on_error`` and
    the ``skipped`` list).
    """
    listed = {i.get("id") for i in doc["images"] if isinstance(i, dict) and _int(i.get("id"))}
    boxes: dict[int, list[Row]] = {ident: [] for ident in images}
    bad: dict[int, str] = {}
    for index, ann in enumerate(doc["annotations"]):
        ann = ann if isinstance(ann, dict) else {}
        ident, owner = ann.get("id"), ann.get("image_id")
        where = f"annotation id {ident}" if _int(ident) else f"annotations[{index}]"
        if not _int(owner) or owner not in listed:
            per_input(src, *policy, where, f"image_id {json.dumps(owner)} names no image")
        elif owner in boxes and owner not in bad:
            try:
                if not _crowd(ann):
                    boxes[owner].append(_box(ann, classes))
            except ValueError as exc:
                bad[owner] = f"{where}: {exc}"
    return boxes, bad


def _names(fields: Sequence[FieldSpec], src: str) -> tuple[str, str]:
    """The names of the image field and the boxes field a COCO source fills."""
    kinds = {f.kind: f.name for f in fields}
    if sorted(kinds) != ["boxes", "image"] or len(fields) != 2:
        raise SpecError(
            f"{src}: a COCO annotation file has the fields image and boxes; the spec names "
            f"{sorted((f.name, f.kind) for f in fields)}"
        )
    return kinds["image"], kinds["boxes"]


def _root(src: str, images: str | None) -> str:
    folder = images if images is not None else src.rsplit("/", 1)[0] if is_url(src) else None
    if folder is not None:
        return folder.rstrip("/") if is_url(folder) else os.path.abspath(folder)
    return os.path.dirname(os.path.abspath(src))


def list_coco(
    src: str | os.PathLike[str], fields: Sequence[FieldSpec], on_error: str = "raise"
) -> FieldSource:
    """List a COCO annotation file as items of an image field and a boxes field.

    The images folder is the boxes field's ``images`` option, else the file's folder.

    Raises:
        SourceError: See the module's rules; also no usable image at all.
        SpecError: ``fields`` are not one image field and one boxes field.
    """
    check_policy(on_error)
    src = os.fspath(src).removeprefix("file://")
    image, boxes = _names(fields, src)
    opts = next(f.options for f in fields if f.name == boxes)
    doc = read_coco(src)
    classes, names = categories(src, doc)
    skipped: list[tuple[str, str]] = []
    files = _images(src, doc, on_error, skipped)
    rows, bad = _annotations(src, doc, files, classes, (on_error, skipped))
    root = _root(src, opts["images"])
    items = []
    for ident, name in files.items():
        if ident in bad:
            per_input(src, on_error, skipped, name, bad[ident])
        elif escapes(root, name):
            skipped.append((name, ESCAPES))
        else:
            items.append(FieldItem(name, ((image, name),), ((boxes, tuple(rows[ident])),)))
    if not items:
        raise SourceError(f"{src}: the annotation file lists no usable image")
    items.sort(key=lambda item: item.key)
    return FieldSource(
        root, (image, boxes), tuple(items), ((boxes, names),), tuple(sorted(skipped))
    )


def coco_fields(
    src: str, options: Mapping[str, Mapping[str, Any]], fill: int, keep: bool = False
) -> tuple[FieldSpec, ...]:
    """The fields of a COCO file: ``image`` (RGB, letterbox ``fill``) and ``boxes``.

    ``options``: by kind (``{"boxes": {"max_boxes": 50}}``: the CLI's flags). The boxes'
    ``classes`` is the category count unless given; ``max_boxes`` is learned by the build; a
    relative local ``images`` folder is made absolute (the spec must not depend on the
    working folder).

    Raises:
        SourceError: The file is unreadable or not a COCO file.
        SpecError: Options for another kind, or a bad option value.
    """
    unused = sorted(set(options) - {"image", "boxes"})
    if unused:
        raise SpecError(f"{src}: options for field(s) {unused} a COCO file does not have")
    _, names = categories(src, read_coco(src, keep))
    box_opts = {"classes": len(names), **options.get("boxes", {})}
    images = box_opts.get("images")
    if isinstance(images, str) and not is_url(images):  # the spec names the folder, not cwd
        box_opts["images"] = os.path.abspath(images)
    return (
        FieldSpec("image", "image", {"fill": fill, **options.get("image", {})}),
        FieldSpec("boxes", "boxes", box_opts),
    )
