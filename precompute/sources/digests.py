"""Source fingerprints: a hash of what a build reads, part of a store's identity."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from precompute.errors import InputError
from precompute.sources.inputs import hash_input
from precompute.sources.listing import checkpoint, locate, stat_of

if TYPE_CHECKING:
    from precompute.sources.classes import Source
    from precompute.sources.fields import FieldSource

__all__ = ["field_fingerprint", "fingerprint"]


def _content_record(root: str, key: str, label: object) -> str:
    """``key, sha256, label``; an unreadable input records its stable reason instead."""
    checkpoint()
    try:
        digest = hash_input(locate(root, key))
    except InputError as exc:  # a FIFO, a device, a stuck read: the build skips or names it
        digest = f"!{exc.reason}"
    except OSError as exc:
        digest = f"!{exc.strerror or type(exc).__name__}"
    return f"{key}\0{digest}\0{label}\n"


def _stat_record(root: str, key: str, label: object) -> str:
    """``key, size, mtime_ns, label``; an input that cannot be stat-ed records its reason."""
    checkpoint()
    try:
        size, mtime = stat_of(locate(root, key))
    except OSError as exc:  # missing, a symlink loop, ...: the build skips or names it
        return f"{key}\0!{exc.strerror or type(exc).__name__}\0{label}\n"
    return f"{key}\0{size}\0{mtime}\0{label}\n"


def fingerprint(source: Source, content_hash: bool = False) -> str:
    """Return a sha256 hex digest identifying the source's files and labels.

    By default it hashes ``(key, size, mtime_ns, label)`` of every item (cheap: one ``stat``
    each); with ``content_hash=True`` it hashes ``(key, sha256(bytes), label)`` instead, so a
    copy of the same files elsewhere, or a touched file, gives the same fingerprint. Contents
    are streamed from regular files only, with the read deadline of
    :mod:`precompute.sources.inputs`;
    an input that cannot be read or ``stat``-ed (a FIFO, a device, a missing file, a symlink
    loop) is hashed as its reason, and the build itself then skips it or names it.
    """
    h = hashlib.sha256(b"nostall.source.v1\0")
    h.update(json.dumps(list(source.classes)).encode() + b"\0")
    for key, label in source.items:
        if content_hash:
            record = _content_record(source.root, key, label)
        else:
            record = _stat_record(source.root, key, label)
        h.update(record.encode())
    return h.hexdigest()


def field_fingerprint(source: FieldSource, content_hash: bool = False) -> str:
    """The :func:`fingerprint` of a source of fields: every item's files and inline values.

    Each file field is recorded as :func:`fingerprint` records an item (its field name in
    place of the label); the inline values as canonical JSON. The class names per field are
    part of it too.
    """
    record = _content_record if content_hash else _stat_record
    h = hashlib.sha256(b"nostall.source.v2\0")
    h.update(json.dumps([[f, list(n)] for f, n in source.classes]).encode() + b"\0")
    for item in source.items:
        for field, path in item.files:
            h.update(record(source.root, path, field).encode())
        h.update(json.dumps(item.values, sort_keys=True).encode() + b"\n")
    return h.hexdigest()
