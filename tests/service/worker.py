"""Subprocess entry points for multi-process service tests.

python -m tests.service.worker race ROOT SRC LOG GO READY  # write READY, wait for GO,
                                                           # get_or_build, print the path
python -m tests.service.worker hang ROOT SRC LOG STARTED   # build that hangs after one shard
python -m tests.service.worker lease ROOT KEY READY        # hold a lease until killed

ROOT is a cache folder or a cache root in object storage (then the builders write objects).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from precompute.format.atomic import atomic_write_bytes
from precompute.storage.location import is_url
from service import Cache
from service.cache.builders import Builder
from tests.servers import wait_for
from tests.service.helpers import (
    SPEC,
    hanging_builder,
    hanging_s3_builder,
    index_builder,
    s3_builder,
)


def builder_for(root: str | Path, log: Path | None = None, delay: float = 0.0) -> Builder:
    """The index store's builder for a cache at ``root``, on disk or in object storage."""
    return s3_builder(log, delay) if is_url(root) else index_builder(log, delay)


def _hanging(root: str | Path, started: Path, log: Path) -> Builder:
    if is_url(root):
        return hanging_s3_builder(started, log)
    return hanging_builder(started, log)


def main(argv: list[str]) -> None:
    cmd = argv[0]
    root: str | Path = argv[1] if is_url(argv[1]) else Path(argv[1])
    if cmd == "race":
        src, log, go, ready = argv[2], Path(argv[3]), Path(argv[4]), Path(argv[5])
        cache = Cache(root, builder=builder_for(root, log, delay=1.0))
        atomic_write_bytes(ready, b"ready")  # set up: only the race itself is left
        wait_for(go)
        print(json.dumps({"path": str(cache.get_or_build(src, SPEC))}), flush=True)
    elif cmd == "hang":
        src, log, started = argv[2], Path(argv[3]), Path(argv[4])
        Cache(root, builder=_hanging(root, started, log)).get_or_build(src, SPEC)
    elif cmd == "lease":
        key, ready = argv[2], Path(argv[3])
        with Cache(root, builder=index_builder()).open(key) as path:
            # whole when it appears: the test reads it as soon as it exists
            atomic_write_bytes(ready, str(path).encode())
            time.sleep(600)
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
