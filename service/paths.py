"""Which sources an HTTP client may ask for: only paths under the configured source roots.

A request's ``source`` is refused (:class:`SourceNotAllowedError`, HTTP 400) when it is not a
plain string, is a URL, contains a ``..`` component or a NUL byte, does not exist, or resolves
(following symlinks) outside every root. For a manifest source every listed file is checked
the same way, so a manifest under a root cannot point elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from precompute.errors import SourceError
from service.errors import SourceNotAllowedError

__all__ = ["SourcePolicy"]

MAX_PATH_CHARS = 4096


class SourcePolicy:
    """Confine sources to ``roots``.

    Args:
        roots: Folders under which sources may lie; relative request paths are taken
            relative to the first.
    """

    def __init__(self, roots: Sequence[str | Path]) -> None:
        self.roots = tuple(Path(r).expanduser().resolve(strict=True) for r in roots)
        if not self.roots:
            raise SourceNotAllowedError("at least one source root is required (--source-root)")

    def _under_roots(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def check(self, raw: object) -> Path:
        """Return the resolved source path of a request, or raise ``SourceNotAllowedError``."""
        if not isinstance(raw, str) or not raw or len(raw) > MAX_PATH_CHARS or "\0" in raw:
            raise SourceNotAllowedError(f"source must be a non-empty path string, got {raw!r:.80}")
        if "://" in raw:
            raise SourceNotAllowedError(f"source {raw!r}: URLs are not served; use a local path")
        if ".." in PurePosixPath(raw).parts:
            raise SourceNotAllowedError(f"source {raw!r}: '..' components are not allowed")
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

    def _check_manifest(self, manifest: Path) -> None:
        from precompute.sources import list_source  # lazy

        try:
            listing = list_source(str(manifest), "skip")  # bad labels: the build's on_error
        except SourceError as exc:
            raise SourceNotAllowedError(f"source {str(manifest)!r}: {exc}") from exc
        for key, _ in listing.items:
            where = listing.locate(key)
            if "://" in where:
                raise SourceNotAllowedError(f"manifest {manifest} lists a URL: {key!r}")
            try:
                target = Path(where).resolve(strict=False)
            except (OSError, RuntimeError) as exc:
                raise SourceNotAllowedError(f"manifest {manifest}: bad path {key!r}") from exc
            if not self._under_roots(target):
                raise SourceNotAllowedError(
                    f"manifest {manifest} lists {key!r}, which lies outside the source roots"
                )
