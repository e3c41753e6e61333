"""The catalog: where everything lives under a cache root, and one small JSON file per store.

Layout of a cache root::

    stores/<key>/          published stores (complete; renamed here in one step)
    catalog/<key>.json     the entry; written after the store is published, so an entry means
                           a complete store. Its mtime is the store's last access (LRU clock).
    building/<key>/        a build in progress; a killed build leaves it here and the next
                           build of the same key resumes or wipes it
    locks/<key>.lock       build lock (one builder per key, across processes)
    leases/<key>.lease     shared flocks held by readers
    (locks/ and leases/ are service.coord.local's: the catalog only creates the folders)
    trash/                 stores being deleted (renamed here first, then removed)

Why JSON files rather than sqlite: each entry is written once by one builder with an atomic
rename, so there is no multi-writer table to protect; a crash leaves either the old or the new
file; a hit touches one mtime (no write transaction); and the files are inspectable and work on
shared filesystems where sqlite's locking is unreliable.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import precompute
from precompute.format.atomic import atomic_write_bytes
from precompute.format.layout import StoreInfo
from precompute.splits.record import read_splits
from precompute.storage.location import Location, store_path
from service.cache.builders import BuildRequest
from service.errors import ServiceError

__all__ = ["CacheLayout", "Entry", "atomic_write_json", "dir_size"]


@dataclass(frozen=True)
class Entry:
    """One complete store in the cache.

    Attributes:
        key: The cache key.
        path: The store directory (a ``Location`` for a store in object storage).
        source: The canonical source path it was built from.
        spec: The canonical build spec (``BuildSpec.to_dict()``).
        source_fingerprint: The fingerprint that went into the key.
        transform_version: ``precompute.TRANSFORM_VERSION`` at build time.
        format_version: The store format version.
        size_bytes: Bytes on disk.
        num_samples: Sample slots in the store.
        num_valid: Samples actually stored.
        created: Unix time the store was published.
        build_seconds: Wall time of the build.
        last_access: Unix time of the last hit (the entry file's mtime).
        splits: The parts of the split recorded with the store and their sample counts (a
            manifest's ``split`` column; ``docs/loaders.md``, "Choosing samples"); empty
            without one.
    """

    key: str
    path: Path
    source: str
    spec: dict[str, Any]
    source_fingerprint: str
    transform_version: str
    format_version: int
    size_bytes: int
    num_samples: int
    num_valid: int
    created: float
    build_seconds: float
    last_access: float = field(default=0.0, compare=False)
    splits: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_build(
        cls,
        request: BuildRequest,
        info: StoreInfo,
        path: Path,
        size_bytes: int,
        created: float,
        build_seconds: float,
    ) -> Entry:
        """Return the entry of the checked store ``info`` that ``request`` built at ``path``."""
        return cls(
            key=request.key,
            path=path,
            source=str(request.source),
            spec=request.spec.to_dict(),
            source_fingerprint=request.fingerprint,
            transform_version=str(precompute.TRANSFORM_VERSION),
            format_version=int(info.attrs["version"]),
            size_bytes=size_bytes,
            num_samples=info.layout.num_samples,
            num_valid=info.num_valid,
            created=created,
            build_seconds=build_seconds,
            splits=recorded_counts(path, info.layout.num_samples),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``path`` as a string)."""
        out = asdict(self)
        out["path"] = str(self.path)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], last_access: float = 0.0) -> Entry:
        """Parse :meth:`to_dict` output; ``last_access`` comes from the file's mtime."""
        names = {f.name for f in fields(cls)} - {"last_access"}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["path"] = store_path(kwargs["path"])  # a Location for a store in object storage
        return cls(**kwargs, last_access=last_access)


def recorded_counts(path: Path | Location, num_samples: int) -> dict[str, int]:
    """Samples per part of the split recorded with the store at ``path`` ({} without one).

    Raises:
        StoreMetadataError: The record is damaged.
    """
    recorded = read_splits(path, num_samples)
    return {} if recorded is None else recorded.counts()


def atomic_write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as JSON to ``path`` via a temp file, fsync and rename."""
    atomic_write_bytes(path, json.dumps(doc, sort_keys=True).encode())


def dir_size(path: Path) -> int:
    """Return the bytes of all regular files under ``path``."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


class CacheLayout:
    """Paths under one cache root, and reading/writing catalog entries."""

    SUBDIRS = ("stores", "catalog", "building", "locks", "leases", "trash")

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().absolute()

    def ensure(self) -> None:
        """Create the cache root and its sub-folders.

        Raises:
            ServiceError: The root (or a sub-folder) exists and is not a folder.
        """
        for name in self.SUBDIRS:
            try:
                (self.root / name).mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError) as exc:
                raise ServiceError(f"cache root {self.root}: not a folder ({exc})") from exc

    def store(self, key: str) -> Path:
        """Return where the published store of ``key`` lives."""
        return self.root / "stores" / key

    def entry_file(self, key: str) -> Path:
        """Return the catalog entry file of ``key``."""
        return self.root / "catalog" / f"{key}.json"

    def building(self, key: str) -> Path:
        """Return the build directory of ``key``."""
        return self.root / "building" / key

    def read_entry(self, key: str) -> Entry | None:
        """Return the entry of ``key``, or None when there is none.

        Raises:
            ServiceError: The entry file exists but is not a valid entry.
        """
        path = self.entry_file(key)
        try:
            with open(path, encoding="utf-8") as f:
                mtime = os.fstat(f.fileno()).st_mtime
                data = json.load(f)
            return Entry.from_dict(data, last_access=mtime)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ServiceError(f"{path}: corrupt catalog entry ({exc}); remove the file") from exc

    def write_entry(self, entry: Entry) -> None:
        """Publish ``entry`` atomically."""
        atomic_write_json(self.entry_file(entry.key), entry.to_dict())

    def touch(self, key: str, when: float | None = None) -> bool:
        """Mark ``key`` as used at ``when`` (Unix time; None: now); False if it has no entry."""
        try:
            os.utime(self.entry_file(key), None if when is None else (when, when))
        except FileNotFoundError:
            return False
        return True

    def catalog_keys(self) -> list[str]:
        """Return the keys that have catalog entries, sorted."""
        folder = self.root / "catalog"
        if not folder.is_dir():
            return []
        names = (n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
        return sorted(n[: -len(".json")] for n in names)
