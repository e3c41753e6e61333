"""The ``boxes`` kind (object detection): importing this package registers all of it.

:mod:`~precompute.kinds.boxes.kind` declares the kind (a variable number of ``[x0, y0, x1,
y1, class]`` rows per sample, stored padded to ``max_boxes`` with the count ``FIELD.count``
beside it) and registers it with its build rule, its loader rules, the COCO source reader
(:mod:`precompute.kinds.boxes.coco`) and its flags; :mod:`~precompute.kinds.boxes.place`
maps boxes exactly through a build placement (the cut rule, survivors packed first);
:mod:`~precompute.kinds.boxes.batch` holds the loader's torch rules. Rules: ``docs/boxes.md``.
"""

from precompute.kinds.boxes.kind import BoxesKind, parse_boxes

__all__ = ["BoxesKind", "parse_boxes"]
