"""A scene and its ground truth as a build source: one item per labelled pixel's patch.

``precompute build SCENE --labels GT --patch P`` lists one item per labelled pixel of ``GT``
(optionally one side of a block split, :func:`~precompute.arrays.scene.block_split`). The item's
file is ``SCENE#patch=ROW,COL`` (also its key): the build reads the scene's bytes once per
worker process (:class:`SceneSource` caches the last file read, keyed by path, size and
mtime), decodes it once (:func:`decode_patch` keeps the last decoded scene, reflect-padded by
``P // 2``) and cuts each patch from it, so a shard never re-reads the scene per patch. The
driver decodes the scene once too: the scene :func:`infer_scene_fields` decoded (the CLI's
``--labels``/``--patch``) is handed to the build's :func:`list_scene`.

Fields: ``image`` (``array``, spatial, ``[P, P, C]``, the scene's dtype), ``label`` (class -
1) and ``position`` (:mod:`precompute.fields.position`, whose options hold the recipe). NaN/inf
in a patch is a per-input error naming the patch; a ground truth of another ``H, W`` than the
scene is a :class:`~precompute.errors.SourceError` naming both files and shapes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from precompute.arrays.checks import check_finite
from precompute.arrays.readers import decode_array, read_array
from precompute.arrays.scene import block_split, check_scene
from precompute.errors import DecodeError, InputError, SourceError, SpecError
from precompute.fields import FieldSpec
from precompute.sources.digests import field_fingerprint
from precompute.sources.fields import FieldItem, FieldSource
from precompute.sources.inputs import DEFAULT_MAX_BYTES, READ_DEADLINE_S, read_input
from precompute.sources.listing import read_kept

__all__ = [
    "SceneSource",
    "decode_patch",
    "infer_scene_fields",
    "is_scene_fields",
    "list_scene",
    "patch_file",
]

_PATCH = re.compile(r"^(?P<path>.+)#patch=(?P<row>\d+),(?P<col>\d+)$")
_BYTES: dict[str, Any] = {}  # this process's last scene read: (path, size, mtime) -> bytes
_DECODED: dict[str, Any] = {}  # its last decode: the bytes object, P, key -> padded scene
# Shard tasks of one process may run on several threads (the in-process runner): one reads or
# decodes the scene while the others wait for it, never seeing a cache half replaced.
_CACHE_LOCK = threading.Lock()
# The scene infer_scene_fields decoded, kept for the list_scene of the same build (which takes
# it; listing.read_kept).
_INFERRED: dict[str, Any] = {}


def patch_file(path: str, row: int, col: int) -> str:
    """The file (and key) of the patch centred on ``(row, col)`` of the scene ``path``."""
    return f"{path}#patch={row},{col}"


def _split_file(file: str) -> tuple[str, tuple[int, int] | None]:
    m = _PATCH.match(file)
    return (m["path"], (int(m["row"]), int(m["col"]))) if m else (file, None)


@dataclass(frozen=True)
class SceneSource(FieldSource):
    """A :class:`FieldSource` whose items are patches of one scene file (read once per process).

    Attributes:
        labels_file: The ground truth file (absolute), part of the source's fingerprint.
    """

    labels_file: str = ""

    def fingerprint(self, content_hash: bool = False) -> str:
        """The scene's and ground truth's files (stat or content) and every item's values."""
        scene = _split_file(self.items[0].file("image"))[0] if self.items else ""
        files = (("image", scene), ("labels", self.labels_file))
        h = hashlib.sha256(b"nostall.scene.v1\0")
        h.update(field_fingerprint(FieldSource(self.root, ("image", "labels"),
                                               (FieldItem("scene", files, ()),)), content_hash)
                 .encode())  # fmt: skip
        for item in self.items:
            h.update(json.dumps([item.key, item.values]).encode() + b"\n")
        return h.hexdigest()

    def read_counted(
        self,
        item: FieldItem,
        field: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline_s: float = READ_DEADLINE_S,
    ) -> tuple[bytes, int]:
        """The scene's bytes and how many were read now: 0 when this process's cache served."""
        path = self.locate(_split_file(item.file(field))[0])
        st = os.stat(path)
        ident = (path, st.st_size, st.st_mtime_ns)
        read = 0
        with _CACHE_LOCK:
            if _BYTES.get("ident") != ident:
                _BYTES.clear()
                _BYTES.update(ident=ident, data=read_input(path, max_bytes, deadline_s))
                read = len(_BYTES["data"])
            data: bytes = _BYTES["data"]
        return data, read


def _padded(data: bytes, path: str, field: FieldSpec) -> np.ndarray:
    p = int(field.options["shape"][0])
    ident = (p, path, field.options["key"])
    with _CACHE_LOCK:
        if _DECODED.get("data") is not data or _DECODED.get("ident") != ident:
            scene = read_array(data, path, path, field.options["key"], allow_nonfinite=True)
            if scene.ndim != 3 or scene.shape[2] != field.options["shape"][2]:
                raise DecodeError(path, f"scene of shape {list(scene.shape)} is not [H, W, C]")
            half = p // 2
            pad = ((half, p - 1 - half), (half, p - 1 - half), (0, 0))
            _DECODED.update(data=data, ident=ident, scene=np.pad(scene, pad, "reflect"))
        padded: np.ndarray = _DECODED["scene"]
    return padded


def decode_patch(data: bytes, key: str, field: FieldSpec, max_pixels: int) -> np.ndarray:
    """The ``array`` decoder: a patch ``SCENE#patch=R,C`` is cut from the (cached) scene.

    Any other file is :func:`~precompute.arrays.readers.decode_array`'s.

    Raises:
        DecodeError: Naming the patch (NaN/inf in it) or the scene file.
    """
    path, where = _split_file(key)
    if where is None:
        return decode_array(data, key, field, max_pixels)
    p, q = int(field.options["shape"][0]), int(field.options["shape"][1])
    patch = _padded(data, path, field)[where[0] : where[0] + p, where[1] : where[1] + q]
    try:
        return check_finite(key, patch.copy())
    except DecodeError as exc:
        raise DecodeError(key, f"field {field.name!r}: {exc.reason}") from None


def is_scene_fields(fields: Sequence[FieldSpec]) -> bool:
    """Whether ``fields`` are a scene's: a ``position`` field holds the recipe."""
    return any(f.kind == "position" for f in fields)


def _read(path: str, key: str | None, what: str) -> np.ndarray:
    try:
        data = read_input(path, DEFAULT_MAX_BYTES)
        return read_array(data, path, path, key, allow_nonfinite=what == "scene")
    except (DecodeError, InputError, OSError) as exc:
        raise SourceError(f"{path}: cannot read the {what}: {exc}") from None


def _scene(path: str, key: str | None, keep: bool) -> np.ndarray:
    """The scene ``path`` decoded: the one :func:`infer_scene_fields` kept, else read now.

    With ``keep`` the scene is kept for the next call (one scene at most); without, the kept
    one is dropped, so the driver does not hold it while the build runs. A scene whose file
    changed in between (size, mtime) is read again.
    """
    return read_kept(_INFERRED, path, lambda: _read(path, key, "scene"), keep, (key,))


def _labels_path(scene: str, labels: str) -> str:
    return labels if os.path.isabs(labels) else os.path.join(os.path.dirname(scene), labels)


def _ground_truth(scene_path: str, scene: np.ndarray, opts: Mapping[str, Any]) -> np.ndarray:
    gt_path = _labels_path(scene_path, opts["labels"])
    if not os.path.exists(gt_path) and os.path.exists(opts["labels"]):  # given from the cwd
        folder = os.path.dirname(os.path.abspath(scene_path))
        raise SourceError(
            f"{gt_path}: no such ground truth: --labels {opts['labels']} is taken from the "
            f"scene's folder ({folder}), not the working folder; give it as "
            f"{os.path.relpath(os.path.abspath(opts['labels']), folder)} or as an absolute path"
        )
    gt = _read(gt_path, opts["labels_key"], "ground truth")
    gt = gt[..., 0] if gt.ndim == 3 and gt.shape[2] == 1 else gt
    gt = check_scene(scene, gt, f"{scene_path} and {gt_path}")
    if opts["split"] is None:
        return gt
    side = block_split(gt, opts["split_block"], opts["test_fraction"], opts["split_seed"],
                       opts["split_guard"])  # fmt: skip
    return np.where(side == opts["split"], gt, 0)


def list_scene(src: str, fields: Sequence[FieldSpec]) -> SceneSource:
    """One item per labelled pixel of the scene ``src`` (of the split's side, if any).

    Raises:
        SourceError: The scene or ground truth cannot be read, their shapes disagree, or no
            pixel is labelled.
    """
    path = os.path.abspath(src.removeprefix("file://"))
    opts = next(f for f in fields if f.kind == "position").options
    image = next((f for f in fields if f.name == "image"), None)
    scene = _scene(path, image.options["key"] if image else None, keep=False)
    gt = _ground_truth(path, scene, opts)
    labels_file = os.path.abspath(_labels_path(path, opts["labels"]))
    name = os.path.basename(path)
    items = tuple(
        FieldItem(
            patch_file(name, r, c),
            (("image", patch_file(name, r, c)),),
            (("label", int(gt[r, c]) - 1), ("position", (r, c))),
        )
        for r, c in zip(*(a.tolist() for a in np.nonzero(gt > 0)), strict=True)
    )
    if not items:
        raise SourceError(f"{src}: the ground truth labels no pixel (of this split side)")
    ordered = tuple(sorted(items, key=lambda i: i.key))
    root = os.path.dirname(path)
    return SceneSource(root, ("image", "label", "position"), ordered, labels_file=labels_file)


def infer_scene_fields(
    src: str, options: Mapping[str, Mapping[str, Any]]
) -> tuple[FieldSpec, FieldSpec, FieldSpec]:
    """The fields of a scene build from the CLI's options (``array``, ``position``).

    Raises:
        SpecError: Options for another field, or a bad option.
        SourceError: The scene cannot be read.
    """
    unused = sorted(set(options) - {"array", "position"})
    if unused:
        raise SpecError(f"{src}: a scene build has no {unused} field; drop those options")
    try:
        position = FieldSpec("position", "position", options["position"])
    except SpecError as exc:
        raise SpecError(f"{src}: {exc} (a scene build: --labels GT --patch P)") from None
    key = options.get("array", {}).get("key")
    scene = _scene(os.path.abspath(src.removeprefix("file://")), key, keep=True)
    if scene.ndim != 3:
        raise SourceError(f"{src}: the scene must be (H, W, C), got shape {list(scene.shape)}")
    p = position.options["patch"]
    image = FieldSpec(
        "image",
        "array",
        {"shape": [p, p, scene.shape[2]], "dtype": scene.dtype.name, "spatial": True, "key": key},
    )
    return image, FieldSpec("label", "label"), position
