r"""List a local class-folder tree: ``SRC/<class>/**/<file>``, deterministic and hostile-proof.

Entries are visited in name order; hidden entries (``.name``) are ignored, and so are files
without one of the wanted extensions (:data:`IMAGE_EXTENSIONS` unless the caller names
others: array files, audio files). Entries that would be used but cannot be are **recorded** as
``(key, reason)`` instead of aborting the listing:

- a symlink whose target lies outside the root (``symlink leaves the source root``);
- a name that is not valid UTF-8 (the key shows its bytes as ``\xNN``);
- an entry that cannot be examined, e.g. a symlink loop or an unreadable folder;
- a wanted file name that is not a regular file (a FIFO, a device, a socket).

Symlinks that stay inside the root are followed, each folder at most once.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Set as AbstractSet

from precompute.errors import SourceError
from precompute.sources.inputs import file_kind
from precompute.sources.listing import checkpoint

__all__ = [
    "AUDIO_EXTENSIONS",
    "ESCAPES",
    "IMAGE_EXTENSIONS",
    "IMAGE_SUFFIXES",
    "SEGMENTATION",
    "OnceEach",
    "file_problem",
    "inside",
    "is_folder",
    "same_file",
    "walk_classes",
]

IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".gif", ".webp", ".avif", ".tif", ".tiff"}
    | {".ppm", ".pgm"}
)
# The same without the dot, in the order a WebDataset sample's image member is looked for.
IMAGE_SUFFIXES = ("jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff", "gif", "ppm", "pgm")
AUDIO_EXTENSIONS = frozenset({".wav", ".flac", ".ogg", ".oga", ".mp3", ".aif", ".aiff"})
# Array files (precompute.arrays), and those that are never images (a .tif may be either)
ARRAY_EXTENSIONS = (".npy", ".npz", ".tif", ".tiff", ".mat")
ARRAY_ONLY_EXTENSIONS = frozenset(ARRAY_EXTENSIONS) - IMAGE_EXTENSIONS
ESCAPES = "symlink leaves the source root; not followed"
NOT_UTF8 = "file name is not valid UTF-8; rename it"
SEGMENTATION = ("images", "masks")  # the sub-folders of a segmentation folder, and no other
Skipped = list[tuple[str, str]]
Extensions = AbstractSet[str]


class _Skip(Exception):
    """An entry to record with a reason and leave out."""


def inside(path: str, root_real: str) -> bool:
    """Whether ``path``, symlinks resolved, lies in the resolved folder ``root_real``."""
    return os.path.commonpath([os.path.realpath(path), root_real]) == root_real


def escapes(root: str, path: str) -> bool:
    """Whether relative ``path`` lies in folder ``root`` as written but leaves it via symlinks.

    Absolute paths and URLs name places outside any root: they never escape it.
    """
    if "://" in root or "://" in path or os.path.isabs(path):
        return False
    checkpoint()  # resolves symlinks on disk, once per manifest line
    root = os.path.normpath(root)
    lexical = os.path.normpath(os.path.join(root, path))
    in_root = os.path.commonpath([lexical, root]) == root  # as written, before symlinks
    return in_root and not inside(lexical, os.path.realpath(root))


def same_file(root: str, path: str) -> str:
    """The file manifest ``path`` names under folder ``root``, to find one file listed twice.

    ``a.png``, ``./a.png``, ``sub/../a.png`` and ``a.png``'s absolute path name one file; a URL
    is taken as written (its path part normalised). Lexical: symlinks are not resolved.
    """
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{posixpath.normpath(rest)}"
    if "://" in root:
        return posixpath.normpath(posixpath.join(root, path))
    return os.path.normpath(os.path.join(root, path))


class OnceEach:
    """The files a manifest's lines name: a file named twice, however written, is refused.

    Args:
        src: The manifest (named in the error).
        root: The folder its relative paths start from.
    """

    def __init__(self, src: str, root: str) -> None:
        self.src, self.root = src, root
        self._first: dict[str, tuple[str, str]] = {}  # file -> (where, path as written)

    def add(self, where: str, path: str) -> None:
        """Note that ``where`` (``line N``) names ``path``.

        Raises:
            SourceError: An earlier line names the same file (naming both lines).
        """
        first = self._first.setdefault(same_file(self.root, path), (where, path))
        if first[0] != where:
            also = "" if first[1] == path else f" ({first[1]!r})"
            raise SourceError(
                f"{self.src}: {where}: duplicate path {path!r}: {first[0]}{also} names that file"
            )


def is_folder(entry: os.DirEntry[str], follow_symlinks: bool = True) -> bool:
    """Whether ``entry`` is a folder; False for one that cannot be examined (a symlink loop).

    ``DirEntry.is_dir`` raises for a symlink loop (``ELOOP``) or an entry it may not ``stat``:
    a probe that only asks what a source looks like must never stop on one (the listing
    records it with its reason).
    """
    try:
        return entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        return False


def shown(key: str) -> str:
    r"""``key`` as valid text: bytes of a non-UTF-8 file name written as ``\xNN``."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _classify(entry: os.DirEntry[str], root_real: str, wanted: Extensions) -> str | None:
    """Return ``"dir"``, ``"file"`` or None (ignored); raise ``_Skip`` for an entry to record.

    ``wanted``: the extensions of the files to list (empty: folders only).
    """
    try:
        escapes = entry.is_symlink() and not inside(entry.path, root_real)
        wanted_file = os.path.splitext(entry.name)[1].lower() in wanted
        if not escapes and not wanted_file and not entry.is_dir():
            return None
        mode = None if escapes else entry.stat().st_mode
    except OSError as exc:  # ELOOP, EACCES, ...: stable text, no address, no path
        raise _Skip(f"cannot list: {exc.strerror or type(exc).__name__}") from exc
    if shown(entry.name) != entry.name:
        raise _Skip(NOT_UTF8)
    if mode is None:
        raise _Skip(ESCAPES)
    kind = file_kind(mode)
    if kind == "a folder":
        return "dir"
    if kind is not None:
        raise _Skip(f"not a regular file ({kind})")
    return "file"


def file_problem(root: str, rel: str) -> str | None:
    """Why the file ``rel`` (a path below the folder ``root``) is no input, or None.

    The rules of a folder listing for one file found by a walk of ``root``: a name that is not
    valid UTF-8, a symlink leaving the root, an entry that cannot be examined (a symlink
    loop) and one that is not a regular file (a FIFO, a device) are left out with their reason.
    """
    if shown(rel) != rel:
        return NOT_UTF8
    if escapes(root, rel):
        return ESCAPES
    try:
        mode = os.stat(os.path.join(root, rel)).st_mode
    except OSError as exc:  # ELOOP, EACCES, ...: stable text, no path
        return f"cannot list: {exc.strerror or type(exc).__name__}"
    kind = file_kind(mode)
    return None if kind is None else f"not a regular file ({kind})"


def _entries(folder: str, root: str, skipped: Skipped) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as exc:
        key = shown(os.path.relpath(folder, root).replace(os.sep, "/"))
        skipped.append((key, f"cannot list: {exc.strerror or type(exc).__name__}"))
        return []


def _walk(
    root: str,
    folder: str,
    root_real: str,
    wanted: Extensions,
    seen: set[str],
    files: list[str],
    skipped: Skipped,
    alien: Extensions = frozenset(),
    aliens: list[str] | None = None,
) -> None:
    """Collect ``wanted`` files below ``folder`` (keys relative to ``root``), inside the root.

    Files with an ``alien`` extension go to ``aliens`` (by name: no ``stat``).
    """
    real = os.path.realpath(folder)
    if real in seen:
        return
    seen.add(real)
    for entry in _entries(folder, root, skipped):
        checkpoint()  # a stat per entry: where a stopped listing ends
        key = os.path.relpath(entry.path, root).replace(os.sep, "/")
        if aliens is not None and os.path.splitext(entry.name)[1].lower() in alien:
            aliens.append(key)
            continue
        try:
            kind = _classify(entry, root_real, wanted)
        except _Skip as exc:
            skipped.append((shown(key), str(exc)))
            continue
        if kind == "dir":
            _walk(root, entry.path, root_real, wanted, seen, files, skipped, alien, aliens)
        elif kind == "file":
            files.append(key)


def walk_classes(
    root: str,
    extensions: Extensions = IMAGE_EXTENSIONS,
    alien: Extensions = frozenset(),
    aliens: list[str] | None = None,
) -> tuple[list[tuple[str, int]], list[str], Skipped]:
    """List the folder ``root`` (absolute): ``(items, classes, skipped)``, items unsorted.

    Args:
        root: The absolute path of the folder of class folders.
        extensions: The lower-case extensions (with the dot) of the files to list.
        alien: Extensions of files that must not be there (another kind of source).
        aliens: Where the keys of such files go.

    Returns:
        ``(key, class index)`` of every listed file, the class folder names in name order
        (an empty class folder too) and the ``(key, reason)`` entries recorded, not used.
    """
    root_real = os.path.realpath(root)
    items: list[tuple[str, int]] = []
    skipped: Skipped = []
    classes: list[str] = []
    seen: set[str] = {root_real}
    for entry in _entries(root, root, skipped):
        try:
            kind = _classify(entry, root_real, frozenset())
        except _Skip as exc:
            skipped.append((shown(entry.name), str(exc)))
            continue
        if kind != "dir":
            continue
        files: list[str] = []
        _walk(root, entry.path, root_real, extensions, seen, files, skipped, alien, aliens)
        items.extend((key, len(classes)) for key in files)
        classes.append(entry.name)
    return items, classes, skipped
