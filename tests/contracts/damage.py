"""Ways a complete store gets damaged after its build, shared by the loader and verify tests.

Each damage takes the root of a store written by :func:`make_index_store` (40 samples, shards
of 16, the last holding 8, chunks of 4: three shards per array), damages it in place and returns
what an error must name: the file, and for metadata also the key.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def image_shard(root: Path, shard: int) -> Path:
    """Return the path of ``image`` shard ``shard`` (no variants)."""
    return root / "image" / "c" / str(shard) / "0" / "0" / "0"


def label_shard(root: Path, shard: int) -> Path:
    """Return the path of ``label`` shard ``shard``."""
    return root / "label" / "c" / str(shard)


def cut(path: Path, keep: Callable[[int], int]) -> Path:
    """Truncate ``path`` in place to ``keep(size)`` bytes; return it."""
    os.truncate(path, keep(path.stat().st_size))
    return path


def replace(path: Path, other: Path) -> Path:
    """Replace ``path`` by a copy of ``other`` (a new file, as a copy or a sync tool makes)."""
    tmp = path.with_name("swap.tmp")
    shutil.copyfile(other, tmp)
    os.replace(tmp, path)
    return path


def swap(a: Path, b: Path) -> Path:
    """Swap the contents of two files; return the first."""
    tmp = a.with_name("swap.tmp")
    os.replace(a, tmp)
    os.replace(b, a)
    os.replace(tmp, b)
    return a


def delete(path: Path) -> Path:
    """Delete ``path``; return it."""
    path.unlink()
    return path


# damage -> damaged file (a chunk-level crc32c cannot catch any of these)
SHARD_DAMAGE: dict[str, Callable[[Path], Path]] = {
    "image shard deleted": lambda r: delete(image_shard(r, 1)),
    "label shard deleted": lambda r: delete(label_shard(r, 1)),
    "extent shard deleted": lambda r: delete(r / "extent" / "c" / "2" / "0"),
    "image shard emptied": lambda r: cut(image_shard(r, 1), lambda n: 0),
    "image shard cut mid-file": lambda r: cut(image_shard(r, 1), lambda n: n // 2),
    "image index bytes cut": lambda r: cut(image_shard(r, 1), lambda n: n - 10),
    "image shard replaced by the last one": lambda r: replace(image_shard(r, 0), image_shard(r, 2)),
}

# caught by `precompute verify` only (same size, every chunk self-consistent)
SWAP_DAMAGE: dict[str, Callable[[Path], Path]] = {
    "image shards 0 and 1 swapped": lambda r: swap(image_shard(r, 0), image_shard(r, 1)),
    "label shard replaced by another": lambda r: replace(label_shard(r, 1), label_shard(r, 0)),
}


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _cut_json(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _set(keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = keys.split(".")
        node: Any = doc
        for k in parents:
            node = node[int(k)] if isinstance(node, list) else node[k]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return change


_DELETE = object()
_SHARDING = "codecs.0.configuration"

# damage -> (damaged file, the key an error must name; "" when the file does not parse)
META_DAMAGE: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "group zarr.json cut in half": lambda r: (_cut_json(r / "zarr.json"), ""),
    "image zarr.json cut in half": lambda r: (_cut_json(r / "image" / "zarr.json"), ""),
    "label zarr.json not an object": lambda r: (_write(r / "label" / "zarr.json", "[1, 2]"), ""),
    "image shape a string": lambda r: (
        _edit(r / "image" / "zarr.json", _set("shape", "40")),
        "shape",
    ),
    "label chunk shape negative": lambda r: (
        _edit(r / "label" / "zarr.json", _set(f"{_SHARDING}.chunk_shape", [-4])),
        f"{_SHARDING}.chunk_shape",
    ),
    "extent shard shape a float": lambda r: (
        _edit(r / "extent" / "zarr.json", _set("chunk_grid.configuration.chunk_shape", [16.0, 4])),
        "chunk_grid.configuration.chunk_shape",
    ),
    "image codecs compressed": lambda r: (
        _edit(r / "image" / "zarr.json", _set(f"{_SHARDING}.codecs.1.name", "zstd")),
        f"{_SHARDING}.codecs",
    ),
    "layout missing": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.layout", _DELETE)),
        "nostall.layout",
    ),
    "layout size a string": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.layout.size", "16")),
        "nostall.layout.size",
    ),
    "layout num_samples grown": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.layout.num_samples", 48)).parent
        / "image"
        / "zarr.json",
        "shape",
    ),
    "spec a list": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.spec", [1])),
        "nostall.spec",
    ),
    "num_valid a string": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.num_valid", "40")),
        "nostall.num_valid",
    ),
    "complete a string": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.complete", "yes")),
        "nostall.complete",
    ),
    "spec_hash a number": lambda r: (
        _edit(r / "zarr.json", _set("attributes.nostall.spec_hash", 7)),
        "nostall.spec_hash",
    ),
}
