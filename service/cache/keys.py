"""Cache keys: what a store contains, hashed.

A key is the sha256 of a canonical JSON document holding exactly four things: the canonical
build spec (:meth:`BuildSpec.to_dict`), the source fingerprint (file list with sizes and mtimes,
or content hashes on request), the transform code version and the store format version.
The spec and the fingerprint are the ones the build itself computes
(:func:`precompute.sources.resolve.resolve_build`, see :func:`resolve_request`): a segmentation
folder or a field manifest gets its fields (and their options) in the key, so two requests
differing in a field option (``ignore_index``) get two keys.
Changing any of them gives a new key; nothing else does: dict key order in a request, defaults
spelled out or left implicit, or another spelling of the same source folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import precompute
from precompute.errors import SpecError
from precompute.spec import BuildSpec
from precompute.storage.location import is_url
from service.errors import CacheKeyError, SourceNotAllowedError

__all__ = [
    "KEY_PATTERN",
    "check_key",
    "is_key",
    "key_document",
    "parse_spec",
    "resolve_request",
    "resolve_source",
    "source_fingerprint",
    "store_key",
]

KEY_PATTERN = re.compile(r"[0-9a-f]{64}")


def parse_spec(spec: BuildSpec | Mapping[str, Any], source: str | Path | None = None) -> BuildSpec:
    """Return ``spec`` as a :class:`BuildSpec`, parsing a mapping (raises ``SpecError``).

    With ``source``, a mapping may name kinds' options by ``precompute build``'s flags
    (``{"clip_seconds": 1, "features": "logmel"}``): they set the fields the source has, as the
    command line does (:func:`precompute.clifields.spec_with_flag_fields`). Without it, such
    keys are refused naming the ``fields`` form.
    """
    from precompute.clifields import flag_keys, spec_with_flag_fields  # the kinds' flags

    if isinstance(spec, BuildSpec):
        return spec
    if not isinstance(spec, Mapping):
        raise SpecError(f"a build spec must be a BuildSpec or a mapping, got {type(spec).__name__}")
    if source is not None:
        spec = spec_with_flag_fields(str(source), spec)
    elif flag_keys(spec):
        raise SpecError(
            f"build spec keys {flag_keys(spec)} are precompute build's field flags: here give "
            'them as options of the fields, e.g. {"fields": [{"name": "audio", "kind": "audio", '
            '"options": {"clip_seconds": 1, "representation": "logmel"}}, {"name": "label", '
            '"kind": "label"}]} (docs/service.md)'
        )
    parsed = BuildSpec.from_dict(spec)
    try:  # BuildSpec.from_dict lets some wrong types through (e.g. augment as a list)
        parsed.canonical_json()
    except (AttributeError, TypeError, ValueError) as exc:
        raise SpecError(f"invalid build spec {dict(spec)!r:.200}: {exc}") from exc
    return parsed


def key_document(
    spec: BuildSpec,
    fingerprint: str,
    *,
    transform_version: str | None = None,
    format_version: int | None = None,
) -> dict[str, Any]:
    """Return the document whose canonical JSON is hashed into the key."""
    return {
        "format_version": precompute.FORMAT_VERSION if format_version is None else format_version,
        "source_fingerprint": fingerprint,
        "spec": spec.to_dict(),
        "transform_version": (
            precompute.TRANSFORM_VERSION if transform_version is None else transform_version
        ),
    }


def store_key(
    spec: BuildSpec,
    fingerprint: str,
    *,
    transform_version: str | None = None,
    format_version: int | None = None,
) -> str:
    """Return the 64-hex-digit cache key of ``spec`` built from a source with ``fingerprint``.

    Args:
        spec: The parsed build spec.
        fingerprint: The source fingerprint (see :func:`source_fingerprint`).
        transform_version: Defaults to ``precompute.TRANSFORM_VERSION``.
        format_version: Defaults to ``precompute.FORMAT_VERSION``.
    """
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ValueError(f"a source fingerprint must be a non-empty string, got {fingerprint!r}")
    doc = key_document(
        spec, fingerprint, transform_version=transform_version, format_version=format_version
    )
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_key(text: object) -> bool:
    """Return whether ``text`` is spelled like a cache key (64 lowercase hex digits)."""
    return isinstance(text, str) and KEY_PATTERN.fullmatch(text) is not None


def check_key(text: object) -> str:
    """Return ``text`` if it is a well-formed key, else raise :class:`CacheKeyError`."""
    if not is_key(text):
        raise CacheKeyError(f"not a cache key (want 64 lowercase hex digits): {text!r}")
    return str(text)


def resolve_source(source: str | Path) -> Path | str:
    """Return the canonical absolute path of a local source folder or manifest.

    An ``s3://`` URL is returned as it is, without a trailing slash (listing it checks it).

    Raises:
        SourceNotAllowedError: The path does not exist.
    """
    if isinstance(source, str) and is_url(source):
        return source.rstrip("/")
    path = Path(source).expanduser()
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise SourceNotAllowedError(f"source {str(source)!r} does not exist") from exc


def source_fingerprint(source: str | Path, *, content_hash: bool = False) -> str:
    """Fingerprint a v1 source (file list, sizes, mtimes or hashes): ``sources.classes``.

    A class-folder tree or a ``path,label`` manifest only: a source with fields (a
    segmentation folder, a manifest of field columns) is fingerprinted with its spec by
    :func:`resolve_request`, which the cache uses for every source.
    """
    from precompute.sources import classes as sources  # lazy: listing pulls in the image stack

    # "skip": a manifest line with an unusable label is recorded, not raised, so a spec with
    # on_error="skip" gets the key its build computes (a "raise" build of such a source fails).
    listing = sources.list_source(str(resolve_source(source)), "skip")
    return str(sources.fingerprint(listing, content_hash=content_hash))


def resolve_request(
    source: str | Path, spec: BuildSpec, *, content_hash: bool = False
) -> tuple[Path | str, BuildSpec, str]:
    """Return the canonical source, the resolved spec and the fingerprint a build would use.

    The spec is resolved as :func:`precompute.job.build` resolves it: the fields of a
    segmentation folder or a field manifest inferred, and what a kind learns from the source
    (a keypoint count, label classes) filled in, so the key names the store the build writes.
    The source is listed with ``on_error: skip`` (a bad manifest line fails the build, under
    ``raise``, not the key).

    Raises:
        SourceNotAllowedError: The source does not exist.
        SpecError: The source has fields and needs an option the spec does not give.
        SourceError: The source cannot be listed.
    """
    from precompute.sources.resolve import resolve_build  # lazy: listing pulls in the image stack

    src = resolve_source(source)
    lenient = dataclasses.replace(spec, on_error="skip")
    _, resolved, fingerprint = resolve_build(str(src), lenient, content_hash)
    return src, dataclasses.replace(resolved, on_error=spec.on_error), fingerprint
