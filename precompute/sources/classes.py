"""The one lister of class folders and ``path,label`` manifests, local or fsspec, of any kind.

:func:`list_class_files` lists the files of one kind (image, array, audio: the kind decides
which file extensions are its own, ``Kind.extensions``; files of another kind's extensions in
the same folders are refused, naming both, never dropped); :func:`list_source` is the v1
lister, of the v1 profile's image files. A :class:`Source` is the frozen, sorted list of
``(key, label)`` items a build reads. Keys are
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
from precompute.fields import KINDS, Kind, v1_fields
from precompute.sources.digests import fingerprint
from precompute.sources.folders import (
    ESCAPES,
    IMAGE_EXTENSIONS,
    SEGMENTATION,
    OnceEach,
    escapes,
    shown,
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
    "list_class_files",
    "list_source",
]

MANIFEST_EXTENSIONS = (".csv", ".jsonl", ".ndjson")


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

    The v1 lister: :func:`list_class_files` of the v1 profile's image kind. In a folder source
    every sub-folder of the root is a class (sorted by name; label = index) and every image
    file below it (recursively, by extension, hidden files ignored) is an item. Files
    directly in the root are ignored. A manifest's labels follow
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
    return list_class_files(src, v1_fields()[0].spec, on_error, text)


def list_class_files(
    src: str | os.PathLike[str],
    kind: Kind,
    on_error: str = "raise",
    text: str | None = None,
    check_paths: bool = False,
) -> Source:
    """List the files of ``kind`` in class folders or a ``path,label`` manifest.

    Args:
        src: A folder of class folders, a ``.csv``/``.jsonl``/``.ndjson`` manifest, or an
            fsspec URL of either.
        kind: The kind whose files are listed: its ``extensions`` are the files a folder
            lists; another kind's files beside them are refused, naming both.
        on_error: ``raise`` or ``skip``: a manifest line with an unusable label (or, with
            ``check_paths``, a path of another extension) raises or is recorded.
        text: The manifest's text when the caller has read it already (read here if None).
        check_paths: Refuse manifest paths without one of the kind's extensions.

    Raises:
        SourceError: No such folder, no class folder, no file of the kind, files of another
            kind beside them, a malformed manifest, a duplicate path.
    """
    check_policy(on_error)
    src = _strip_file_scheme(os.fspath(src))
    if src.lower().endswith(MANIFEST_EXTENSIONS):
        return _list_manifest(src, kind, on_error, text, check_paths)
    if is_url(src):
        return _list_remote_folder(src, kind)
    return _list_local_folder(src, kind)


# -- folders ---------------------------------------------------------------------------------


def _ext(name: str) -> str:
    return os.path.splitext(name)[1].lower()


def _kinds_by_extension(but: Kind | None = None) -> dict[str, Kind]:
    """Extension -> the first registered kind that claims it (none of ``but``'s own)."""
    out: dict[str, Kind] = {}
    for kind in KINDS.values():
        for ext in kind.extensions:
            out.setdefault(ext, kind)
    own = set(but.extensions) if but is not None else set()
    return {ext: kind for ext, kind in out.items() if ext not in own}


def _files_of(names: list[str], by_ext: dict[str, Kind]) -> str:
    """``audio files`` / ``audio or array files``: the kinds of ``names``."""
    kinds = [k.name for k in KINDS.values() if k in {by_ext[_ext(n)] for n in names}]
    return f"{' or '.join(kinds)} files"


def _list_local_folder(src: str, kind: Kind) -> Source:
    root = os.path.abspath(src)
    if os.path.isfile(root):
        raise SourceError(f"{src}: a file that no source reader takes{_archive_hint([root])}")
    if not os.path.isdir(root):
        raise SourceError(f"{src}: source folder does not exist (or is not a folder)")
    others: list[str] = []
    by_ext = _kinds_by_extension(kind)
    wanted = frozenset(kind.extensions)
    items, classes, skipped = walk_classes(root, wanted, alien=frozenset(by_ext), aliens=others)
    if others and items:  # e.g. cover art beside recordings: never a store of them alone
        example, first = min(items)[0], min(others)
        other = by_ext[_ext(first)]
        hint = f"; {other.beside}" if other.beside else ""
        raise SourceError(
            f"{src}: mixes {kind.name} files ({len(items)}, e.g. {example}) and {other.name} "
            f"files ({len(others)}, e.g. {first}): keep one kind per source folder{hint}"
        )
    if not classes:
        raise SourceError(f"{src}: no class sub-folders ({_expected(root)})")
    if set(SEGMENTATION) <= set(classes):  # never two classes "images" and "masks"
        beside = [f"{c}/" for c in classes if c not in SEGMENTATION]
        if beside:
            what = (
                f"holds images/ and masks/ beside {', '.join(beside)}: a segmentation folder's "
                "only sub-folders are images/ and masks/; move the others out, then build it "
                "with --mask-classes N"
            )
        else:
            what = "is a segmentation folder (images/ + masks/): build it with --mask-classes N"
        raise SourceError(
            f"{src}: {what}; read as class folders, its images and masks would be two classes"
        )
    if not items:
        found = (
            f" (but {len(others)} {_files_of(others, by_ext)}, e.g. {min(others)})"
            if others
            else ""
        )
        if skipped:  # e.g. every file a symlink to outside the source: say so, not "none"
            key, why = min(skipped)
            found += f" ({len(skipped)} left out while listing, e.g. {shown(key)}: {why})"
        raise SourceError(
            f"{src}: no {kind.name} files ({', '.join(kind.extensions)}) found under the "
            f"class folders{found}"
        )
    return Source(root, tuple(sorted(items)), tuple(classes), tuple(sorted(skipped)))


# Compressed archives: never read (a build reads files at their offsets, never unpacking)
_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar.zst", ".zip", ".7z", ".rar")


def _archive_hint(names: list[str]) -> str:
    """``: compressed archives are not read ...`` when ``names`` hold one; else nothing."""
    packed = [n for n in names if n.lower().endswith(_ARCHIVES)]
    if not packed:
        return ""
    return (
        f": compressed archives ({os.path.basename(packed[0])}) are not read; unpack them, "
        "or decompress WebDataset shards to plain .tar"
    )


def _expected(root: str) -> str:
    """What a class-folder source should look like, naming the files lying at its top."""
    try:
        top = sorted(e.name for e in os.scandir(root) if e.is_file() and e.name[:1] != ".")
    except OSError:
        top = []
    if hint := _archive_hint(top):
        return f"expected SRC/<class>/<file>{hint}"
    by_ext = _kinds_by_extension()
    found = [n for n in top if _ext(n) in by_ext]
    if not found:
        every = [k.name for k in KINDS.values() if k.extensions]
        listed = f"{', '.join(every[:-1])} or {every[-1]}" if len(every) > 1 else every[0]
        return f"expected SRC/<class>/<file>: one sub-folder of {listed} files a class"
    kinds = sorted({by_ext[_ext(n)].name for n in found})
    what = " and ".join(f"{k} files" for k in kinds)
    return (
        f"expected SRC/<class>/<{kinds[0]} file>; {len(found)} {what} lie at its top, e.g. "
        f"{found[0]}: put each class's files in a sub-folder named after the class, or list "
        "them in a CSV/JSONL manifest"
    )


def _list_remote_folder(src: str, kind: Kind) -> Source:
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
        if _ext(rel) in kind.extensions:
            by_class.setdefault(parts[0], []).append(rel)
    if not by_class:
        raise SourceError(f"{src}: no {kind.name} files in class sub-folders")
    classes = tuple(sorted(by_class))
    items = sorted((key, label) for label, c in enumerate(classes) for key in by_class[c])
    return Source(src.rstrip("/"), tuple(items), classes)


# -- manifests -------------------------------------------------------------------------------


def _an(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _list_manifest(
    src: str, kind: Kind, on_error: str, text: str | None, check_paths: bool
) -> Source:
    text = read_manifest_text(src) if text is None else text
    rows, classes, skipped = parse_manifest(src, text, on_error)
    root = src.rsplit("/", 1)[0] if is_url(src) else os.path.dirname(os.path.abspath(src))
    items: dict[str, int] = {}
    once = OnceEach(src, root)
    for n, path, label in rows:
        key = path.replace("\\", "/") if not is_url(path) else path
        once.add(f"line {n}", key)
        if check_paths and _ext(key) not in kind.extensions:
            why = f"line {n}: {key!r} is not {_an(kind.name)} file ({', '.join(kind.extensions)})"
            if on_error == "raise":
                raise SourceError(f"{src}: {why}")
            skipped.append((key, why))
        elif escapes(root, key):
            skipped.append((key, ESCAPES))
        else:
            items[key] = label
    if not items:
        raise SourceError(f"{src}: manifest lists no {kind.name} files")
    return Source(root, tuple(sorted(items.items())), classes, tuple(sorted(skipped)))
