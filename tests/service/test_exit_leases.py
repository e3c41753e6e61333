"""A loader opened through the cache and never closed, in a real process that then exits.

Its lease is released by the cache's exit hook, before the interpreter tears its modules down:
no ``Exception ignored in: StoreLease.__del__`` on stderr, and a lease in object storage is
deleted, not left for a collection to judge dead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from precompute.storage.location import location
from service import Cache
from tests.objectservers import new_bucket
from tests.processes import REPO
from tests.service.helpers import SPEC, make_source
from tests.service.worker import builder_for

pytestmark = pytest.mark.slow  # a subprocess that imports torch

# A user's script: the loader a global of __main__, alive until the interpreter tears down.
SCRIPT = """
import sys
from loaders import StoreLoader
loader = StoreLoader(sys.argv[2], 4, cache_root=sys.argv[1])
print(sum(len(batch["index"]) for batch in loader), flush=True)
"""


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_loader_left_open_releases_its_lease_quietly_at_exit(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    root = str(tmp_path / "cache") if where == "local" else f"{new_bucket(request, 's3')}/cache"
    source = make_source(tmp_path / "src")
    cache = Cache(root, builder=builder_for(root))
    cache.get_or_build(source, SPEC)
    key = cache.key_for(source, SPEC)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, root, key],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "12\n"), done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    if where == "s3":  # released at exit: its lease object deleted by the process itself
        assert location(f"{root}/leases/{key}").list() == {}
    assert cache.gc(budget_bytes=0).evicted == (key,)
