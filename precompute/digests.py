"""Source fingerprints: a hash of what a build reads, part of a store's identity."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from precompute.errors import SourceError

if TYPE_CHECKING:
    from precompute.sources import Source

__all__ = ["fingerprint"]


def fingerprint(source: Source, content_hash: bool = False) -> str:
    """Return a sha256 hex digest identifying the source's files and labels.

    By default it hashes ``(key, size, mtime_ns, label)`` of every item (cheap: one ``stat``
    each); with ``content_hash=True`` it hashes ``(key, sha256(bytes), label)`` instead, so a
    copy of the same files elsewhere, or a touched file, gives the same fingerprint.
    """
    h = hashlib.sha256(b"nostall.source.v1\0")
    h.update(json.dumps(list(source.classes)).encode() + b"\0")
    for key, label in source.items:
        if content_hash:
            digest = hashlib.sha256(source.read_bytes(key)).hexdigest()
            record = f"{key}\0{digest}\0{label}\n"
        else:
            try:
                size, mtime = source.stat(key)
            except OSError as exc:
                raise SourceError(f"{source.locate(key)}: cannot stat: {exc}") from exc
            record = f"{key}\0{size}\0{mtime}\0{label}\n"
        h.update(record.encode())
    return h.hexdigest()
