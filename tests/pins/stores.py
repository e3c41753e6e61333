"""The pinned stores: which source and flags each is built with, and a store's digest.

A pin is the store a build of committed inputs (``tests/pins/src``) writes with today's code:
the sha256 of every array file (chunk shards and ``zarr.json``), the group's metadata except
the timing report, the spec hash, both source fingerprints and the cache key. Restructuring the
build must leave every pin as it is; a change that means to alter stored bytes re-records the
pins (``python -m tests.pins.record``) and says why.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from precompute.cli import cli
from precompute.format.layout import open_store_info
from service.cache.keys import store_key

SRC = Path(__file__).with_name("src")
PINS = Path(__file__).with_name("pins.json")
MTIME_NS = 1_700_000_000_123_456_789  # every input's mtime, so stat fingerprints are fixed

# name -> (source under tests/pins/src, build flags)
STORES: dict[str, tuple[str, tuple[str, ...]]] = {
    "classes-letterbox": ("classes", ("--size", "32")),
    "classes-center-crop": (
        "classes",
        ("--size", "24", "--mode", "center-crop", "--shard-samples", "8", "--chunk-samples", "4"),
    ),
    "manifest-squash": ("classes/manifest.csv", ("--size", "20", "--mode", "squash")),
    "classes-variants": ("classes", ("--size", "16", "--variants", "2", "--seed", "3")),
    "segmentation": ("seg", ("--size", "32", "--mask-classes", "4")),
    "keypoints": ("points/points.jsonl", ("--size", "32", "--mode", "letterbox")),
    "audio-logmel": ("audio", ("--clip-seconds", "0.5", "--features", "logmel")),
    "cubes": ("cubes", ("--size", "8")),
}


def copy_inputs(dest: Path) -> Path:
    """Copy the pin inputs to ``dest`` with every mtime set to :data:`MTIME_NS`."""
    shutil.copytree(SRC, dest)
    for path in sorted(dest.rglob("*"), reverse=True):
        os.utime(path, ns=(MTIME_NS, MTIME_NS), follow_symlinks=False)
    return dest


def build_pin(inputs: Path, name: str, out: Path, *extra: str) -> Path:
    """Build pin ``name`` from ``inputs`` (a copy made by :func:`copy_inputs`) into ``out``."""
    src, flags = STORES[name]
    args = ["build", str(inputs / src), "--out", str(out), "--quiet", *flags, *extra]
    cli.main(args=args, prog_name="precompute", standalone_mode=False)
    return out


def _files(root: Path) -> dict[str, str]:
    """sha256 of every file of the Zarr hierarchy below the group (markers and lock left out)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel != "zarr.json" and not rel.startswith("_nostall"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def store_pin(root: Path, content_fingerprint: str) -> dict[str, Any]:
    """The pin of the complete store at ``root``."""
    info = open_store_info(root)
    attrs = {k: v for k, v in info.attrs.items() if k != "report"}
    return {
        "files": _files(root),
        "attrs": json.loads(json.dumps(attrs, sort_keys=True)),
        "spec_hash": info.spec_hash,
        "source_fingerprint": info.source_fingerprint,
        "content_fingerprint": content_fingerprint,
        "cache_key": store_key(info.spec, info.source_fingerprint),
        "num_valid": info.num_valid,
    }
