"""Upload a local folder to a store location: every file as one whole object, chosen files last.

Used to put a store built on disk (or a raw dataset) under an object-store prefix: name the
store's group ``zarr.json`` (its completion marker, ``docs/FORMAT.md``) in ``last`` so that a
reader never sees a complete store whose arrays are still being uploaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from precompute.errors import StoreError
from precompute.storage.location import Location, location

__all__ = ["put_folder"]


def put_folder(folder: str | Path, url: str | Location, *, last: Iterable[str] = ()) -> int:
    """Write every file under ``folder`` as ``url/<relative path>``; return the number of files.

    Files go in sorted order of their paths, except those named in ``last`` (paths relative to
    ``folder``, ``/``-separated), which go after all others, in the order given.

    Raises:
        StoreError: ``folder`` is not a folder.
        OSError: A write failed (the message names the object).
    """
    root = Path(folder)
    if not root.is_dir():
        raise StoreError(f"{root}: not a folder, nothing to upload to {url}")
    dest = location(url)
    later = list(last)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    ordered = [f for f in files if f not in later] + [f for f in later if f in files]
    for name in ordered:
        target = dest
        for part in name.split("/"):
            target = target / part
        target.write_bytes((root / name).read_bytes())
    return len(ordered)
