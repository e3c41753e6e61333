"""List a raw image dataset: a class-folder tree or a CSV/JSONL manifest, local or fsspec.

A :class:`Source` is the frozen, sorted list of ``(key, label)`` items a build reads. Keys are
paths relative to the source root with forward slashes (or, in a manifest, absolute paths and
URLs as written). The list is a pure function of the files, so the same folder always gives the
same store.

Symlinks: a symlink (file or folder) inside a local source root whose target lies outside the
root is **not followed**. It is left out of ``items`` and recorded in ``Source.skipped`` with the
reason; a build copies those records into its report, whatever its ``on_error`` policy. Symlinks
that stay inside the root are followed (each folder at most once). Symlink loops, non-UTF-8
names and non-regular files are recorded the same way (:mod:`precompute.sources.folders`).

Reading an item reads a regular file only, at most ``max_bytes``, with a deadline
(:mod:`precompute.sources.inputs`); manifests are parsed by :mod:`precompute.sources.manifests`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from precompute.errors import SourceError
from precompute.sources.digests import fingerprint
from precompute.sources.folders import (
    ARRAY_ONLY_EXTENSIONS,
    AUDIO_EXTENSIONS,
    ESCAPES,
    IMAGE_EXTENSIONS,
    escapes,
    walk_classes,
)
from precompute.sources.inputs import DEFAULT_MAX_BYTES, READ_DEADLINE_S, read_input
from precompute.sources.listing import check_policy, is_url, locate, stat_of
from precompute.sources.manifests import MAX_LABEL, parse_manifest, read_manifest_text

__all__ = [
    "IMAGE_EXTENSIONS",
    "MANIFEST_EXTENSIONS",
    "MAX_LABEL",
    "Source",
    "fingerprint",
    "list_source",
]

MANIFEST_EXTENSIONS = (".csv", ".jsonl", ".ndjson")
_OTHER_KINDS = AUDIO_EXTENSIONS | ARRAY_ONLY_EXTENSIONS  # never beside images in one folder
_CUBE_HINT = (
    "a folder whose first file is a .tif is read as images: for cubes give --fields with "
    "kind 'array' (docs/arrays.md)"
)


def _strip_file_scheme(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


@dataclass(frozen=True)
class Source:
    """A listed raw dataset.

    Attributes:
        root: The source root: a local folder (absolute) or an fsspec URL of a folder.
        items: ``(key, label)`` pairs sorted by key; keys are unique.
        classes: Class names; ``label`` indexes this tuple. Empty for a manifest with integer
            labels (kept as given, each at most ``MAX_LABEL``).
        skipped: ``(key, reason)`` of entries left out while listing (escaping symlinks,
            unreadable entries, manifest lines skipped under ``on_error: skip``).
    """

    root: str
    items: tuple[tuple[str, int], ...]
    classes: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    @property
    def num_classes(self) -> int:
        """The number of classes: ``len(classes)``, or the largest integer label + 1."""
        if self.classes or not self.items:
            return len(self.classes)
        return max(label for _, label in self.items) + 1

    @property
    def is_local(self) -> bool:
        """Whether the root is a local folder."""
        return not is_url(self.root)

    def locate(self, key: str) -> str:
        """Return the local path or URL of item ``key``."""
        return locate(self.root, key)

    def read_bytes(
        self, key: str, max_bytes: int = DEFAULT_MAX_BYTES, deadline_s: float = READ_DEADLINE_S
    ) -> bytes:
        """Return the raw bytes of item ``key`` (fsspec for URLs), read safely.

        Only regular files are read, at most ``max_bytes`` bytes, and a read with no data for
        ``deadline_s`` seconds is abandoned (:mod:`precompute.sources.inputs`).

        Raises:
            InputError: Not a regular file, larger than ``max_bytes``, or stuck.
            OSError: Missing or unreadable.
        """
        return read_input(self.locate(key), max_bytes, deadline_s)

    def stat(self, key: str) -> tuple[int, int]:
        """Return ``(size, mtime_ns)`` of item ``key`` (mtime 0 where the filesystem has none)."""
        return stat_of(self.locate(key))


def list_source(
    src: str | os.PathLike[str], on_error: str = "raise", text: str | None = None
) -> Source:
    """List ``src``: a class-folder tree or a ``.csv``/``.jsonl`` manifest of ``path,label``.

    In a folder source every sub-folder of the root is a class (sorted by name; label = index)
    and every image file below it (recursively, by extension, hidden files ignored) is an item.
    Files directly in the root are ignored. A manifest's labels follow
    :mod:`precompute.sources.manifests`: all integers (kept, no class list) or all class names.

    Args:
        src: A folder, a manifest, or an fsspec URL of either.
        on_error: The build's policy for a manifest line with an unusable label: ``raise``
            (a :class:`SourceError` naming the line) or ``skip`` (recorded in ``skipped``).
        text: The manifest's text when the caller has read it already (read here if None).

    Raises:
        SourceError: The path is missing, holds no images, the manifest is malformed, or
            ``on_error`` is neither ``raise`` nor ``skip``.
    """
    check_policy(on_error)
    src = _strip_file_scheme(os.fspath(src))
    if src.lower().endswith(MANIFEST_EXTENSIONS):
        return _list_manifest(src, on_error, text)
    if is_url(src):
        return _list_remote_folder(src)
    return _list_local_folder(src)


# -- folders ---------------------------------------------------------------------------------


def _list_local_folder(src: str) -> Source:
    root = os.path.abspath(src)
    if not os.path.isdir(root):
        raise SourceError(f"{src}: source folder does not exist (or is not a folder)")
    others: list[str] = []
    items, classes, skipped = walk_classes(root, alien=_OTHER_KINDS, aliens=others)
    if others and items:  # e.g. cover art beside recordings: never a store of them alone
        example, first = min(items)[0], min(others)
        kind = "audio" if os.path.splitext(first)[1].lower() in AUDIO_EXTENSIONS else "array"
        hint = "" if kind == "audio" else f"; {_CUBE_HINT}"
        raise SourceError(
            f"{src}: mixes image files ({len(items)}, e.g. {example}) and {kind} files "
            f"({len(others)}, e.g. {first}): keep one kind per source folder{hint}"
        )
    if not classes:
        raise SourceError(f"{src}: no class sub-folders ({_expected(root)})")
    if not items:
        found = f" (but {len(others)} audio or array files, e.g. {min(others)})" if others else ""
        raise SourceError(f"{src}: no image files found under the class folders{found}")
    return Source(root, tuple(sorted(items)), tuple(classes), tuple(sorted(skipped)))


_KIND_OF_EXTENSION = {
    **{ext: "image" for ext in IMAGE_EXTENSIONS},
    **{ext: "audio" for ext in AUDIO_EXTENSIONS},
    **{ext: "array" for ext in ARRAY_ONLY_EXTENSIONS},
}


def _expected(root: str) -> str:
    """What a class-folder source should look like, naming the files lying at its top."""
    try:
        top = sorted(e.name for e in os.scandir(root) if e.is_file() and e.name[:1] != ".")
    except OSError:
        top = []
    kinds = sorted({_KIND_OF_EXTENSION.get(os.path.splitext(n)[1].lower(), "") for n in top})
    kinds = [k for k in kinds if k]
    if not kinds:
        return "expected SRC/<class>/<file>: one sub-folder of image, audio or array files a class"
    found = [n for n in top if os.path.splitext(n)[1].lower() in _KIND_OF_EXTENSION]
    what = " and ".join(f"{k} files" for k in kinds)
    return (
        f"expected SRC/<class>/<{kinds[0]} file>; {len(found)} {what} lie at its top, e.g. "
        f"{found[0]}: put each class's files in a sub-folder named after the class, or list "
        "them in a CSV/JSONL manifest"
    )


def _list_remote_folder(src: str) -> Source:
    from precompute.storage.s3fsspec import fsspec_s3

    try:
        fs, path = fsspec_s3().core.url_to_fs(src)
        found = fs.find(path)
    except (OSError, ValueError, ImportError) as exc:
        raise SourceError(f"{src}: cannot list source: {exc}") from exc
    path = path.rstrip("/")
    by_class: dict[str, list[str]] = {}
    for name in found:
        rel = name[len(path) :].lstrip("/")
        parts = rel.split("/")
        if len(parts) < 2 or any(p.startswith(".") for p in parts):
            continue
        if os.path.splitext(rel)[1].lower() in IMAGE_EXTENSIONS:
            by_class.setdefault(parts[0], []).append(rel)
    if not by_class:
        raise SourceError(f"{src}: no image files in class sub-folders")
    classes = tuple(sorted(by_class))
    items = sorted((key, label) for label, c in enumerate(classes) for key in by_class[c])
    return Source(src.rstrip("/"), tuple(items), classes)


# -- manifests -------------------------------------------------------------------------------


def _list_manifest(src: str, on_error: str, text: str | None) -> Source:
    text = read_manifest_text(src) if text is None else text
    rows, classes, skipped = parse_manifest(src, text, on_error)
    if not rows:
        raise SourceError(f"{src}: manifest lists no images")
    root = src.rsplit("/", 1)[0] if is_url(src) else os.path.dirname(os.path.abspath(src))
    items: dict[str, int] = {}
    for n, path, label in rows:
        key = path.replace("\\", "/") if not is_url(path) else path
        if key in items:
            raise SourceError(f"{src}: line {n}: duplicate path {key!r}")
        if escapes(root, key):
            skipped.append((key, ESCAPES))
            continue
        items[key] = label
    return Source(root, tuple(sorted(items.items())), classes, tuple(sorted(skipped)))
