"""Reading a store's ``zarr.json`` documents, and the one-line error that names a bad key."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from precompute.errors import StoreMetadataError
from precompute.storage.location import Location

__all__ = ["metadata_error", "read_json"]


def metadata_error(meta: Any, key: str, reason: str) -> StoreMetadataError:
    """Return the error for key ``key`` of metadata file ``meta`` (one line, value shortened)."""
    return StoreMetadataError(f"{meta}: invalid store metadata: key '{key}': {reason}"[:400])


def read_json(meta: Path | Location) -> Mapping[str, Any]:
    """Return the JSON object in ``meta``.

    Raises:
        StoreMetadataError: The file cannot be read, is not JSON, or holds no JSON object.
    """
    try:
        doc = json.loads(meta.read_text())
    except (OSError, ValueError, RecursionError) as exc:  # a cut file, bad UTF-8, deep nesting
        raise StoreMetadataError(f"{meta}: unreadable store metadata: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise StoreMetadataError(
            f"{meta}: store metadata must be a JSON object, got {type(doc).__name__}"
        )
    return doc
