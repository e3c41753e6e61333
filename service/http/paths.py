"""Which sources an HTTP client may ask for: only paths under the configured source roots.

A request's ``source`` is refused (:class:`SourceNotAllowedError`, HTTP 400) when it is not a
plain string, is a URL, contains a ``..`` component or a NUL byte, does not exist, or resolves
(following symlinks) outside every root. For a manifest source every listed file is checked
the same way, so a manifest under a root cannot point elsewhere: the ``path`` column of a v1
manifest, every file column (``image``, ``mask``) of a manifest of fields.

A root may also be an object-store prefix (``s3://bucket/prefix``): then sources under it are
served (a folder-like prefix holding objects, or a manifest object whose files lie under such a
root too); other URLs never are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from precompute.errors import PrecomputeError, SourceError, StoreError
from precompute.storage.location import is_url, location, scheme_of, store_path
from service.errors import SourceNotAllowedError

__all__ = ["SourcePolicy"]

MAX_PATH_CHARS = 4096


def _folder(root: str | Path) -> Path:
    """Return the resolved source root folder ``root``, or raise naming it."""
    try:
        path = Path(root).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise SourceNotAllowedError(f"source root {str(root)!r} does not exist") from exc
    if not path.is_dir():
        raise SourceNotAllowedError(f"source root {str(root)!r} is not a folder")
    return path


class SourcePolicy:
    """Confine sources to ``roots``.

    Args:
        roots: Folders (or ``s3://`` prefixes) under which sources may lie; relative request
            paths are taken relative to the first folder.
    """

    def __init__(self, roots: Sequence[str | Path]) -> None:
        urls = [str(r) for r in roots if _object_url(str(r))]
        self.url_roots = tuple(u.rstrip("/") for u in urls)
        self.roots = tuple(_folder(r) for r in roots if str(r) not in urls)
        if not self.roots and not self.url_roots:
            raise SourceNotAllowedError("at least one source root is required (--source-root)")

    def _under_roots(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def check(self, raw: object) -> Path | str:
        """Return the resolved source path of a request, or raise ``SourceNotAllowedError``."""
        if not isinstance(raw, str) or not raw or len(raw) > MAX_PATH_CHARS or "\0" in raw:
            raise SourceNotAllowedError(f"source must be a non-empty path string, got {raw!r:.80}")
        if ".." in PurePosixPath(raw).parts:
            raise SourceNotAllowedError(f"source {raw!r}: '..' components are not allowed")
        if _object_url(raw) and self.url_roots:
            return self._check_url(raw)
        if scheme_of(raw):
            raise SourceNotAllowedError(f"source {raw!r}: URLs are not served; use a local path")
        if not self.roots:
            raise SourceNotAllowedError(
                f"source {raw!r}: only sources under {list(self.url_roots)} are served"
            )
        path = Path(raw) if Path(raw).is_absolute() else self.roots[0] / raw
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise SourceNotAllowedError(f"source {raw!r} does not exist") from exc
        if not self._under_roots(resolved):
            raise SourceNotAllowedError(
                f"source {raw!r} resolves outside the source roots {[str(r) for r in self.roots]}"
            )
        if resolved.is_file():
            self._check_manifest(resolved)
        return resolved

    def _under_urls(self, url: str) -> bool:
        return any(url == root or url.startswith(root + "/") for root in self.url_roots)

    def _check_url(self, raw: str) -> str:
        """Return an object-store source under an object-store root that exists."""
        url = raw.rstrip("/")
        if not self._under_urls(url):
            raise SourceNotAllowedError(
                f"source {raw!r} lies outside the source roots {list(self.url_roots)}"
            )
        try:
            found = bool(location(url).list())
        except (OSError, PrecomputeError) as exc:
            raise SourceNotAllowedError(f"source {raw!r}: cannot list it ({exc})") from exc
        if not found:  # not a prefix: a manifest object, whose files must lie under the roots
            self._check_manifest(url)
        return url

    def _check_manifest(self, manifest: Path | str) -> None:
        try:
            listed = _manifest_files(str(manifest))
        except SourceError as exc:
            raise SourceNotAllowedError(f"source {str(manifest)!r}: {exc}") from exc
        for key, where in listed:
            if scheme_of(where):
                if not _object_url(where) or ".." in PurePosixPath(where).parts:
                    raise SourceNotAllowedError(f"manifest {manifest} lists a URL: {key!r}")
                if not self._under_urls(where):
                    raise SourceNotAllowedError(
                        f"manifest {manifest} lists {key!r}, which lies outside the source roots"
                    )
                continue
            try:
                target = Path(where).resolve(strict=False)
            except (OSError, RuntimeError) as exc:
                raise SourceNotAllowedError(f"manifest {manifest}: bad path {key!r}") from exc
            if not self._under_roots(target):
                raise SourceNotAllowedError(
                    f"manifest {manifest} lists {key!r}, which lies outside the source roots"
                )


def _manifest_files(manifest: str) -> list[tuple[str, str]]:
    """``(path as written, where it resolves)`` of every file a manifest lists."""
    from precompute.sources.classes import Source, list_source  # lazy: the image stack
    from precompute.sources.resolve import manifest_file_columns
    from precompute.sources.rows import csv_rows, jsonl_rows, read_text

    columns = manifest_file_columns(manifest)
    if not columns:  # a v1 manifest (path,label); bad labels: the build's on_error
        listing = list_source(manifest, "skip")
        return [(key, listing.locate(key)) for key, _ in listing.items]
    text = read_text(manifest)
    csv = manifest.lower().endswith(".csv")
    rows = csv_rows(manifest, text, columns) if csv else jsonl_rows(manifest, text)
    root = str(store_path(manifest).parent)
    found = (row.get(c) for _, row in rows for c in columns)
    where = Source(root, (), ())
    return [(p, where.locate(p)) for p in found if isinstance(p, str) and p]


def _object_url(text: str) -> bool:
    """Whether ``text`` is a URL of an object store (one :func:`location` opens)."""
    if not is_url(text):
        return False
    try:
        location(text)
    except StoreError:
        return False
    return True
