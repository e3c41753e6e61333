"""A store's recorded split: ``_nostall/splits.json``, written atomically, read by loaders.

The file (``docs/FORMAT.md``, "Splits") holds the part names, each part's sample count, the
rule that made it (a :class:`~precompute.splits.assign.Split`'s dict, or ``{"column": NAME}``
for a manifest's column), and every slot's part: one byte per slot (255: in no part), zlib
compressed and base64 encoded, with its sha256. It lies beside the build's markers, outside
the Zarr hierarchy: recording or replacing a split never touches an array or the group's
metadata, so it leaves the store's ``spec_hash``, its files and its completeness as they
were. One write puts the whole file (a rename on disk, one PUT in object storage).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from precompute.errors import StoreError, StoreMetadataError
from precompute.format.layout import MARKER_DIR
from precompute.splits.assign import NONE
from precompute.storage.location import Location, location

__all__ = ["SPLITS_FILE", "RecordedSplits", "read_splits", "split_lines", "write_splits"]

SPLITS_FILE = "splits.json"
_FORMAT, _VERSION = "nostall.splits", 1


@dataclass(frozen=True, eq=False)
class RecordedSplits:
    """A store's named parts.

    Attributes:
        names: The part names, in the order of their index.
        parts: Every slot's part (an index into ``names``; 255: none).
        rule: How the parts were made (a split rule's dict, or ``{"column": NAME}``).
    """

    names: tuple[str, ...]
    parts: npt.NDArray[np.uint8]
    rule: Mapping[str, Any]

    def counts(self) -> dict[str, int]:
        """Samples per part, by name."""
        found = np.bincount(self.parts[self.parts != NONE], minlength=len(self.names))
        return {name: int(c) for name, c in zip(self.names, found, strict=True)}

    def members(self, name: str) -> npt.NDArray[np.bool_]:
        """The mask of the slots in part ``name``.

        Raises:
            KeyError: No part of that name (the message names the parts).
        """
        if name not in self.names:
            raise KeyError(f"no split {name!r}; the store's splits are {list(self.names)}")
        mask: npt.NDArray[np.bool_] = self.parts == self.names.index(name)
        return mask

    def to_doc(self) -> dict[str, Any]:
        """The file's JSON document."""
        raw = np.ascontiguousarray(self.parts, np.uint8).tobytes()
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "names": list(self.names),
            "counts": self.counts(),
            "rule": dict(self.rule),
            "slots": len(self.parts),
            "parts": base64.b64encode(zlib.compress(raw, 9)).decode(),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }


def _path(root: str | Path | Location) -> Location:
    return location(root) / MARKER_DIR / SPLITS_FILE


def write_splits(root: str | Path | Location, splits: RecordedSplits) -> None:
    """Record ``splits`` with the store at ``root`` (one atomic write; replaces any)."""
    _path(root).write_bytes(json.dumps(splits.to_doc(), sort_keys=True).encode())


def read_splits(root: str | Path | Location, num_samples: int) -> RecordedSplits | None:
    """The split recorded with the store at ``root``, or None (none recorded).

    Raises:
        StoreMetadataError: The file is damaged, of another format, or of another number of
            slots (the message names the file and what is wrong).
    """
    path = _path(root)
    try:
        text = path.read_bytes()
    except (FileNotFoundError, StoreError):
        return None
    try:
        doc = json.loads(text)
        if doc.get("format") != _FORMAT or doc.get("version") != _VERSION:
            raise ValueError(f"format {doc.get('format')!r} version {doc.get('version')!r}")
        raw = zlib.decompress(base64.b64decode(doc["parts"]))
        if hashlib.sha256(raw).hexdigest() != doc["sha256"]:
            raise ValueError("the parts do not match their sha256")
        parts = np.frombuffer(raw, np.uint8).copy()
        names = tuple(str(n) for n in doc["names"])
        if len(parts) != num_samples or int(doc["slots"]) != num_samples:
            raise ValueError(f"{len(parts)} slots, the store has {num_samples}")
        if len(parts) and int(parts[parts != NONE].max(initial=0)) >= max(len(names), 1):
            raise ValueError("a slot names a part past the names")
        return RecordedSplits(names, parts, dict(doc.get("rule", {})))
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:
        raise StoreMetadataError(f"{path}: not a readable split record: {exc}") from None


def _stratified(how: Mapping[str, Any]) -> str:
    """``, stratified by F (3 strata)``; one stratum: said to have done nothing."""
    strata = how.get("strata")
    if strata == 1:
        return f", stratified by {how['stratify']} to no effect: every unit in one stratum"
    return f", stratified by {how['stratify']}" + (f" ({strata} strata)" if strata else "")


def split_lines(recorded: RecordedSplits | None) -> list[str]:
    """``precompute inspect``'s line of a recorded split (none without one)."""
    if recorded is None:
        return []
    counts = ", ".join(f"{name} {count}" for name, count in recorded.counts().items())
    how = recorded.rule
    made = (
        f"from the manifest column {how['column']!r}"
        if "column" in how
        else f"seed {how.get('seed')}"
        + (_stratified(how) if how.get("stratify") else "")
        + (f", grouped by {how['group_by']}" if how.get("group_by") else "")
    )
    return [f"splits     {counts} ({made})"]
