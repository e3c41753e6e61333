"""List a raw image dataset: a class-folder tree or a CSV/JSONL manifest, local or fsspec.

A :class:`Source` is the frozen, sorted list of ``(key, label)`` items a build reads. Keys are
paths relative to the source root with forward slashes (or, in a manifest, absolute paths and
URLs as written). The list is a pure function of the files, so the same folder always gives the
same store.

Symlinks: a symlink (file or folder) inside a local source root whose target lies outside the
root is **not followed**. It is left out of ``items`` and recorded in ``Source.skipped`` with the
reason; a build copies those records into its report, whatever its ``on_error`` policy. Symlinks
that stay inside the root are followed (each folder at most once).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from typing import Any

from precompute.digests import fingerprint
from precompute.errors import SourceError

__all__ = ["IMAGE_EXTENSIONS", "MANIFEST_EXTENSIONS", "Source", "fingerprint", "list_source"]

IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
)
MANIFEST_EXTENSIONS = (".csv", ".jsonl", ".ndjson")
_ESCAPES = "symlink leaves the source root; not followed"


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _strip_file_scheme(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


@dataclass(frozen=True)
class Source:
    """A listed raw dataset.

    Attributes:
        root: The source root: a local folder (absolute) or an fsspec URL of a folder.
        items: ``(key, label)`` pairs sorted by key; keys are unique.
        classes: Class names; ``label`` indexes this tuple.
        skipped: ``(key, reason)`` of entries left out while listing (escaping symlinks).
    """

    root: str
    items: tuple[tuple[str, int], ...]
    classes: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    @property
    def is_local(self) -> bool:
        """Whether the root is a local folder."""
        return not _is_url(self.root)

    def locate(self, key: str) -> str:
        """Return the local path or URL of item ``key``."""
        if _is_url(key) or os.path.isabs(key):
            return key
        if self.is_local:
            return os.path.join(self.root, *key.split("/"))
        return self.root.rstrip("/") + "/" + key

    def read_bytes(self, key: str) -> bytes:
        """Return the raw bytes of item ``key`` (fsspec for URLs)."""
        where = self.locate(key)
        if not _is_url(where):
            with open(where, "rb") as f:
                return f.read()
        from precompute.s3fsspec import fsspec_s3  # lazy: only URL sources need it

        fsspec = fsspec_s3()  # s3:// through boto3 when s3fs is missing

        with fsspec.open(where, "rb") as f:
            return bytes(f.read())

    def stat(self, key: str) -> tuple[int, int]:
        """Return ``(size, mtime_ns)`` of item ``key`` (mtime 0 where the filesystem has none)."""
        where = self.locate(key)
        if not _is_url(where):
            st = os.stat(where)
            return st.st_size, st.st_mtime_ns
        from precompute.s3fsspec import fsspec_s3

        fs, path = fsspec_s3().core.url_to_fs(where)
        info = fs.info(path)
        mtime = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
        if hasattr(mtime, "timestamp"):
            mtime = mtime.timestamp()
        return int(info.get("size") or 0), int(float(mtime) * 1e9)


def list_source(src: str | os.PathLike[str]) -> Source:
    """List ``src``: a class-folder tree or a ``.csv``/``.jsonl`` manifest of ``path,label``.

    In a folder source every sub-folder of the root is a class (sorted by name; label = index)
    and every image file below it (recursively, by extension, hidden files ignored) is an item.
    Files directly in the root are ignored.

    Raises:
        SourceError: The path is missing, holds no images, or the manifest is malformed.
    """
    src = _strip_file_scheme(os.fspath(src))
    if src.lower().endswith(MANIFEST_EXTENSIONS):
        return _list_manifest(src)
    if _is_url(src):
        return _list_remote_folder(src)
    return _list_local_folder(src)


# -- local folders ---------------------------------------------------------------------------


def _inside(path: str, root_real: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), root_real]) == root_real


def _walk_class(
    root: str,
    folder: str,
    root_real: str,
    seen: set[str],
    files: list[str],
    skipped: list[tuple[str, str]],
) -> None:
    """Collect image files below ``folder`` (keys relative to ``root``), not leaving the root."""
    real = os.path.realpath(folder)
    if real in seen:
        return
    seen.add(real)
    with os.scandir(folder) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        key = os.path.relpath(entry.path, root).replace(os.sep, "/")
        if entry.is_symlink() and not _inside(entry.path, root_real):
            skipped.append((key, _ESCAPES))
        elif entry.is_dir():
            _walk_class(root, entry.path, root_real, seen, files, skipped)
        elif entry.is_file() and os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
            files.append(key)


def _list_local_folder(src: str) -> Source:
    root = os.path.abspath(src)
    if not os.path.isdir(root):
        raise SourceError(f"{src}: source folder does not exist (or is not a folder)")
    root_real = os.path.realpath(root)
    items: list[tuple[str, int]] = []
    skipped: list[tuple[str, str]] = []
    classes: list[str] = []
    seen: set[str] = {root_real}
    with os.scandir(root) as it:
        class_dirs = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    for entry in class_dirs:
        if entry.is_symlink() and not _inside(entry.path, root_real):
            skipped.append((entry.name, _ESCAPES))
            continue
        if not entry.is_dir():
            continue
        files: list[str] = []
        _walk_class(root, entry.path, root_real, seen, files, skipped)
        items.extend((key, len(classes)) for key in files)
        classes.append(entry.name)
    if not classes:
        raise SourceError(f"{src}: no class sub-folders (expected SRC/<class>/<image>)")
    if not items:
        raise SourceError(f"{src}: no image files found under the class folders")
    return Source(root, tuple(sorted(items)), tuple(classes), tuple(sorted(skipped)))


def _list_remote_folder(src: str) -> Source:
    from precompute.s3fsspec import fsspec_s3

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


def _read_text(src: str) -> str:
    try:
        if _is_url(src):
            from precompute.s3fsspec import fsspec_s3

            with fsspec_s3().open(src, "rt", encoding="utf-8") as f:
                return str(f.read())
        with open(src, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError as exc:
        raise SourceError(f"{src}: manifest does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{src}: cannot read manifest: {exc}") from exc


def _csv_rows(src: str, text: str) -> list[tuple[int, Any, Any]]:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if rows and [c.strip().lower() for c in rows[0]][:2] == ["path", "label"]:
        header = [c.strip().lower() for c in rows.pop(0)]
        ip, il = header.index("path"), header.index("label")
    else:
        ip, il = 0, 1
    out = []
    for n, row in enumerate(rows, start=1):
        if len(row) <= max(ip, il):
            raise SourceError(f"{src}: row {n} has no path,label: {row!r}")
        out.append((n, row[ip].strip(), row[il].strip()))
    return out


def _jsonl_rows(src: str, text: str) -> list[tuple[int, Any, Any]]:
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            out.append((n, doc["path"], doc["label"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"{src}: line {n} is not a JSON object with path and label") from exc
    return out


def _labels(src: str, rows: list[tuple[int, Any, Any]]) -> tuple[list[int], tuple[str, ...]]:
    """Integer labels are kept; otherwise labels are class names (sorted; label = index)."""
    raw = [str(r[2]) for r in rows]
    if all(s.lstrip("-").isdigit() for s in raw):
        ints = [int(s) for s in raw]
        bad = [(r[0], i) for r, i in zip(rows, ints, strict=True) if i < 0]
        if bad:
            raise SourceError(f"{src}: row {bad[0][0]}: negative label {bad[0][1]}")
        return ints, tuple(str(i) for i in range(max(ints) + 1))
    classes = tuple(sorted(set(raw)))
    index = {c: i for i, c in enumerate(classes)}
    return [index[s] for s in raw], classes


def _list_manifest(src: str) -> Source:
    text = _read_text(src)
    rows = _jsonl_rows(src, text) if not src.lower().endswith(".csv") else _csv_rows(src, text)
    if not rows:
        raise SourceError(f"{src}: manifest lists no images")
    labels, classes = _labels(src, rows)
    root = src.rsplit("/", 1)[0] if _is_url(src) else os.path.dirname(os.path.abspath(src))
    root_real = "" if _is_url(root) else os.path.realpath(root)
    items: dict[str, int] = {}
    skipped: list[tuple[str, str]] = []
    for (n, path, _), label in zip(rows, labels, strict=True):
        key = str(path).replace("\\", "/") if not _is_url(str(path)) else str(path)
        if not key:
            raise SourceError(f"{src}: row {n} has an empty path")
        if key in items:
            raise SourceError(f"{src}: row {n}: duplicate path {key!r}")
        local = root_real and not _is_url(key) and not os.path.isabs(key)
        lexical = os.path.normpath(os.path.join(root, key)) if local else ""
        if local and _inside(lexical, os.path.normpath(root)) and not _inside(lexical, root_real):
            skipped.append((key, _ESCAPES))
            continue
        items[key] = label
    return Source(root, tuple(sorted(items.items())), classes, tuple(sorted(skipped)))
