"""Another store at ``--out``: what differs (:func:`differences`), refused or replaced.

A build into an ``--out`` that holds another store is refused (``StoreMismatchError``, naming
what differs, option by option: ``size: 224 (store) vs 256 (this command)``; the refused build
writes nothing into that store): a half-built store whose bad inputs were fixed since differs
in its source, and a store of other options in those options. ``--replace``: the build
(holding the build lock) deletes that store first, and only when it is one:

- the folder (or object prefix) must hold a nostall store's group metadata (``zarr.json`` with
  the ``nostall`` attribute); anything else is refused by the output checks, never deleted;
- every entry beside it must be the store's own: its arrays (folders holding a Zarr array's
  ``zarr.json``) and ``_nostall/``; a file of anyone else's stops the replacement before
  anything is deleted;
- the arrays and markers go first, the group metadata last (the build lock is kept): a
  replacement cut short leaves a store that a second ``--replace`` finishes removing.

Every delete goes through the storage layer, so a store in object storage is replaced the same
way (on a local folder, the emptied sub-folders are removed too).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from precompute.checks import show
from precompute.errors import PrecomputeError, StoreError, StoreMismatchError
from precompute.format.codecs import CodecSpec
from precompute.format.layout import FORMAT_NAME, MARKER_DIR, StoreLayout, _read_group_attrs
from precompute.spec import BuildSpec
from precompute.storage.location import Location, location

__all__ = ["differences", "other_store", "replace_other"]

_LOCK = "build.lock"  # in MARKER_DIR: held by the build that replaces
_DIGEST = re.compile(r"[0-9a-f]{64}")  # a fingerprint: shown by its first 12 digits
_LAYOUT = {"num_samples": "samples"}  # a layout key by the name a person knows it
_WHY = {"transform.fingerprint": " (the transform's code or arguments changed since)"}


def _shown(value: Any, path: str = "") -> str:
    if value is None:  # a chunk codec left out: the field is stored raw
        return "raw" if path.startswith("codecs.") else "none"
    if isinstance(value, str):
        return value[:12] if _DIGEST.fullmatch(value) else show(value).strip("'\"")
    if isinstance(value, (Mapping, list)):
        return show(json.dumps(value, sort_keys=True)).strip("'")
    return show(value)


def _changes(old: Any, new: Any, path: str) -> list[str]:
    """``PATH: OLD (store) vs NEW (this command)`` per differing leaf (mappings recursed)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = [*old, *(k for k in new if k not in old)]
        return [line for k in keys for line in _changes(old.get(k), new.get(k), f"{path}{k}.")]
    if old == new:
        return []
    line = f"{path[:-1]}: {_shown(old, path)} (store) vs {_shown(new, path)} (this command)"
    return [line + _WHY.get(path[:-1], "")]


def _options(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded spec's options as this version reads them (as recorded if it cannot)."""
    try:
        out = BuildSpec.from_dict(recorded).options()
    except (PrecomputeError, ValueError, TypeError, KeyError):  # a kind not installed here
        out = dict(recorded)
    return _by_name(out)


def _by_name(options: dict[str, Any]) -> dict[str, Any]:
    """Fields as ``{name: {kind, options...}}`` (compared by name), codecs as text (``jpeg:90``)."""
    codecs = options.get("codecs")
    if isinstance(codecs, Mapping):
        options["codecs"] = {name: _codec_text(c) for name, c in codecs.items()}
    fields = options.get("fields")
    if isinstance(fields, list):
        options["fields"] = {
            str(f.get("name")): {"kind": f.get("kind"), **(f.get("options") or {})}
            for f in fields
            if isinstance(f, Mapping)
        }
    return options


def _codec_text(codec: Any) -> Any:
    try:
        return str(CodecSpec.from_dict(codec))
    except PrecomputeError:  # a codec this version does not know: as recorded
        return codec


def _same_spec(old: Mapping[str, Any], spec: BuildSpec) -> bool:
    """Whether a store's recorded spec is ``spec``: its hash, or its spec as parsed today.

    A store recorded before an option left the spec (a waveform's log-mel options,
    ``Kind.unused``) keeps its recorded hash; read today, its spec is the same spec.
    """
    if old.get("spec_hash") == spec.digest():
        return True
    try:
        return BuildSpec.from_dict(old.get("spec") or {}).digest() == spec.digest()
    except (PrecomputeError, ValueError, TypeError):  # a spec this version cannot read
        return False


def differences(
    old: Mapping[str, Any], spec: BuildSpec, fingerprint: str, layout: StoreLayout | None = None
) -> list[str]:
    """What makes the store of group attributes ``old`` another store than this build's.

    One line per difference, each naming what a person can change: the format, an option of
    the spec (``size: 224 (store) vs 256 (this command)``, a field's option
    ``fields.mask.classes: ...``), the source (its fingerprint), and with ``layout`` (a
    half-built store, resumed only into the same slots) the sample count. Empty: the same store.
    """
    out = []
    if old.get("format") != FORMAT_NAME:
        out.append(f"format: {_shown(old.get('format'))} (store) vs {FORMAT_NAME} (this command)")
    elif layout is not None and old.get("version") != layout.version:
        out.append(f"format version: {_shown(old.get('version'))} (store) vs {layout.version} "
                   "(this command)")  # fmt: skip
    if not _same_spec(old, spec):
        recorded = old.get("spec")
        given = _by_name(spec.options())
        found = _changes(_options(recorded), given, "") if isinstance(recorded, Mapping) else []
        out += found or [f"spec: hash {_shown(old.get('spec_hash'))} (store) vs "
                         f"{spec.digest()[:12]} (this command)"]  # fmt: skip
    if old.get("source_fingerprint") != fingerprint:
        out.append(f"source: another source, or its files changed since (fingerprint "
                   f"{_shown(old.get('source_fingerprint'))} (store) vs {fingerprint[:12]} "
                   "(this command))")  # fmt: skip
    if layout is not None and isinstance(old.get("layout"), Mapping):
        named = {line.split(":")[0] for line in out}
        for line in _changes(old["layout"], layout.to_dict(), ""):
            key = line.split(":")[0]
            if key not in named:  # size and the like: named as the spec's options already
                out.append(_LAYOUT.get(key, key) + line[len(key) :])
    elif layout is not None:
        out.append("layout: missing (store)")
    return out


def other_store(root: object, state: str, found: list[str]) -> StoreMismatchError:
    """The refusal of a build into ``root``: a ``state`` store is there, differing in ``found``."""
    return StoreMismatchError(
        f"{root}: holds a {state} store of another spec or source: {'; '.join(found)}; choose "
        "another --out, or build with --replace to replace it"
    )


def replace_other(
    root: str | Path | Location, spec: BuildSpec, layout: StoreLayout, fingerprint: str
) -> str | None:
    """Delete the store at ``root`` if it is another spec's or source's; say what differed.

    What differed: :func:`differences`, joined by ``; ``. None when there is nothing to
    replace: no store, or a store of this very build (complete: nothing to do; partial: it
    resumes). The caller holds the build lock.

    Raises:
        StoreError: ``root`` holds a ``zarr.json`` that is no nostall store's, or entries that
            are not the store's (nothing is deleted then).
    """
    where = location(root)
    if not (where / "zarr.json").exists():
        return None
    differs = differences(_read_group_attrs(where), spec, fingerprint, layout)
    if not differs:
        return None
    _check_own(where)
    lock = (where / MARKER_DIR / _LOCK).key
    meta = (where / "zarr.json").key
    for key in where.list():
        if key not in (lock, meta):
            where.store.delete(key)
    where.store.delete(meta)  # the group last: until then a --replace can finish the job
    if where.local:
        _prune(where.path())
    return "; ".join(differs)


def _is_array(where: Location) -> bool:
    """Whether ``where`` holds a Zarr v3 array (its ``zarr.json`` says so)."""
    try:
        doc = json.loads((where / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "array"


def _check_own(where: Location) -> None:
    """Every entry of the store folder is the store's: arrays, ``zarr.json``, ``_nostall/``."""
    for name in where.store.list_dir(where.key):
        if name in ("zarr.json", MARKER_DIR) or _is_array(where / name):
            continue
        raise StoreError(
            f"{where}: holds {where / name}, which is not part of its store; --replace deletes "
            "a nostall store only: move it out first"
        )


def _prune(folder: Path) -> None:
    """Remove the emptied sub-folders of a local store (its root and ``_nostall/`` stay)."""
    for path, dirs, _ in os.walk(folder, topdown=False):
        for name in dirs:
            sub = Path(path) / name
            if sub != folder / MARKER_DIR and not sub.is_symlink():
                try:
                    sub.rmdir()
                except OSError:  # not empty: a symlinked folder's link, left as it is
                    continue
