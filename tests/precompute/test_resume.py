"""Crash safety: a real build process killed with SIGKILL mid-way, then resumed; build lock.

One scenario, both writers: the store on local disk and in object storage (the real S3 test
server and the real Azure Blob one), each resumed to the bytes of a clean local build.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import zarr

from precompute import BuildLockedError, BuildSpec, StoreIncompleteError, build, open_store_info
from precompute.format.layout import ATTR_KEY, MARKER_DIR
from precompute.format.verify import verify_store
from precompute.sample import make_sample_dataset
from precompute.storage.location import is_url, location, store_path
from tests.objectservers import PROTOCOLS, new_bucket, objects_under

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SPEC = {"size": 32, "shard_samples": 4, "chunk_samples": 2, "seed": 7}
NUM = 80  # 20 shards: the kill lands after the first (asserted), the rest are resumed
CHILD = """
import sys
from precompute import BuildSpec, build
build(sys.argv[1], sys.argv[2], BuildSpec(**{spec!r}), progress=False, runner={runner!r})
"""


def _markers(out: Path | str) -> int:
    if is_url(out):
        return sum(k.endswith(".json") for k in location(f"{out}/{MARKER_DIR}/shards").list())
    folder = Path(out) / MARKER_DIR / "shards"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def _exists(out: Path | str, name: str) -> bool:
    return store_path(f"{out}/{name}").is_file()


def _arrays(out: Path) -> dict[str, object]:
    data: dict[str, object] = {
        name: zarr.open_array(str(out / name), mode="r")[:].tobytes()
        for name in ("image", "label", "extent")
    }
    data["key"] = zarr.open_array(str(out / "key"), mode="r")[:].tolist()
    return data


def _read_all(out: Path | str) -> dict[str, bytes]:
    """Every file of the store by its path inside it, on disk or in object storage."""
    if is_url(out):
        return objects_under(str(out))
    root = Path(out)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _store_files(out: Path | str) -> dict[str, str]:
    """sha256 of every file of the store (docs/FORMAT.md: the same build gives the same bytes):
    the arrays' metadata and shard files, and the group's ``zarr.json`` less its build report."""
    read = _read_all(out)
    files = {
        name: hashlib.sha256(data).hexdigest()
        for name, data in sorted(read.items())
        if name.split("/", 1)[0] not in ("zarr.json", MARKER_DIR)
    }
    group = json.loads(read["zarr.json"])
    group["attributes"][ATTR_KEY].pop("report")
    files["zarr.json less the report"] = json.dumps(group, sort_keys=True)
    return files


def _wait(child: subprocess.Popen[bytes], ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 240
    while not ready():  # each look at an s3:// store is a request to the server: 50 a second
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline, "child build made no progress"
        time.sleep(0.02)


def _start_child(src: Path, out: Path | str, runner: str) -> subprocess.Popen[bytes]:
    code = CHILD.format(spec=SPEC, runner=runner)
    return subprocess.Popen(
        [sys.executable, "-c", code, str(src), str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _kill(child: subprocess.Popen[bytes], whole_group: bool, runner: str) -> None:
    """SIGKILL the build (its process group, or the driver alone), wait for all of it to die."""
    # All of it: raylet, GCS, workers, the agents (they used to linger for a minute) and the
    # watchdog that kills them (in its own session, so killpg does not reach it).
    family = psutil.Process(child.pid).children(recursive=True)
    assert any("Agent" in _name(p) for p in family) == (runner == "ray")
    if whole_group:
        os.killpg(child.pid, signal.SIGKILL)
    else:
        os.kill(child.pid, signal.SIGKILL)  # Ray's processes must die with their driver
    child.wait()
    _gone, alive = psutil.wait_procs(family, timeout=20)
    running = [p for p in alive if _status(p) not in ("zombie", "gone")]  # zombies: unreaped
    assert not running, f"processes outlived the killed build: {running}"


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.NoSuchProcess:
        return ""


def _plant_debris(out: Path) -> list[Path]:
    """Write the temporary files a writer killed mid-write leaves (zarr's and the markers')."""
    debris = [
        out / "zarr.0123456789abcdef0123456789abcdef.partial",  # the group's zarr.json
        out / "label" / "zarr.0123456789abcdef0123456789abcdef.partial",
        out / MARKER_DIR / "shards" / ".000000.json.k3j2h1.tmp",
    ]
    for path in debris:
        path.write_bytes(b'{"trunc')
    return debris


def _status(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return "gone"


def _output(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    if backend == "local":
        return tmp_path / "killed"
    return f"{new_bucket(request, backend, 'nostall-resume')}/stores/killed.zarr"


# Session-scoped, not module-scoped: made once per test process (each xdist worker that runs one
# of these tests makes its own); this module's tests spread over the workers (tests/conftest.py).
@pytest.fixture(scope="session")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raw dataset every build here reads (the killed builds write elsewhere)."""
    return make_sample_dataset(tmp_path_factory.mktemp("src"), NUM, size_range=(96, 256), seed=2)


@pytest.fixture(scope="session")
def clean(src: Path, ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of one clean build, never killed: what every resumed store must equal."""
    out = tmp_path_factory.mktemp("clean") / "store"
    build(str(src), str(out), BuildSpec(**SPEC), progress=False)
    return out


# Each backend once, each way of killing a Ray build once (pairwise, not the whole product: the
# way the build dies and where its store lives are independent, and each Ray case is a fresh
# Ray), and one sequential build killed (its shards are the same as Ray's).
_KILLS = [
    pytest.param(
        backend, whole, runner, id=f"{'killpg' if whole else 'kill-driver'}-{backend}-{runner}"
    )
    for backend, whole, runner in zip(
        ["local", *PROTOCOLS], [False, True, False], ["ray", "ray", "sequential"], strict=True
    )
]


@pytest.mark.parametrize(("backend", "whole_group", "runner"), _KILLS)
def test_kill_9_then_resume_is_identical_and_second_build_refused(
    s3_server: str,
    azurite_server: str,
    request: pytest.FixtureRequest,
    src: Path,
    clean: Path,
    tmp_path: Path,
    whole_group: bool,
    backend: str,
    runner: str,
) -> None:
    out = _output(backend, request, tmp_path)
    num_shards = NUM // SPEC["shard_samples"]
    child = _start_child(src, out, runner)
    # The child holds the lock from before it creates the store until it finalizes it; while
    # it starts Ray (seconds), a second build into the same output must be refused.
    _wait(child, lambda: _exists(out, "zarr.json"))
    with pytest.raises(BuildLockedError, match="another build"):
        build(str(src), str(out), BuildSpec(**SPEC), progress=False)
    _wait(child, lambda: _markers(out) >= 1)
    _kill(child, whole_group, runner)
    # a kill mid-write of a zarr.json leaves these on disk; rarely hit (objects: none)
    debris = _plant_debris(out) if isinstance(out, Path) else []
    done = _markers(out)
    assert 1 <= done < num_shards, "the kill must land mid-build"
    with pytest.raises(StoreIncompleteError):
        open_store_info(out)

    attrs = build(str(src), str(out), BuildSpec(**SPEC), progress=False)
    assert attrs["complete"] and attrs["report"]["shards_resumed"] >= done
    assert attrs["report"]["shards_built"] == num_shards - attrs["report"]["shards_resumed"]
    if isinstance(out, Path):  # zarr reads local stores here (no s3 filesystem installed)
        assert _arrays(out) == _arrays(clean)
    assert _store_files(out) == _store_files(clean)  # byte for byte
    assert not [p for p in debris if p.exists()]
    # temporary files of the killed writers are gone
    assert not [n for n in _read_all(out) if n.endswith(".partial")]
    if not isinstance(out, Path):  # an object lock is deleted on release (a flock file stays)
        assert f"{MARKER_DIR}/build.lock" not in _read_all(out)
    assert verify_store(out) == []
