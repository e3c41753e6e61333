"""Object-store outputs without Ray: the build lock, refused outputs, create and resume checks
(those that need no wire hook on both object servers, S3 and Azure Blob)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest

from precompute import BuildLockedError
from precompute.errors import StoreError
from precompute.pipeline.outputs import build_lock, check_output
from precompute.storage.location import location, store_path
from tests.objectservers import bucket_and_key, objects_under
from tests.s3wire import WIRE, WireRequest


def test_a_second_build_is_refused_naming_the_holder(any_bucket: str) -> None:
    out = store_path(f"{any_bucket}/s.zarr")
    held = rf"held by {socket.gethostname()} pid {os.getpid()}\); wait for it"
    with build_lock(out), pytest.raises(BuildLockedError, match=held), build_lock(out):
        pass
    with build_lock(out):  # released
        pass


def test_the_lock_of_a_dead_build_on_this_host_is_taken_over(any_bucket: str) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    lock = f"{any_bucket}/s.zarr/_nostall/build.lock"
    holder = {"host": socket.gethostname(), "pid": int(dead.stdout)}
    location(lock).write_bytes(json.dumps(holder).encode())
    with build_lock(store_path(f"{any_bucket}/s.zarr")):
        assert json.loads(location(lock).read_bytes())["pid"] == os.getpid()
    location(lock).write_bytes(json.dumps({"host": "other-host", "pid": 1}).encode())
    out = store_path(f"{any_bucket}/s.zarr")
    with pytest.raises(BuildLockedError, match="held by other-host pid 1"), build_lock(out):
        pass


def _hook_before(
    operation: str, key: str, move: Callable[[], None], skip: str = ""
) -> Callable[[], None]:
    """Run ``move`` once just before the server serves the next ``operation`` on ``key`` (one
    without the header ``skip``); return the unhook. ``move`` stands for another process: it
    uses a client of its own."""
    fired: list[bool] = []

    def hook(req: WireRequest) -> None:
        mine = req.op == operation and req.key == key and skip.lower() not in req.headers
        if mine and not fired:
            fired.append(True)
            move()

    stack = ExitStack()
    stack.enter_context(WIRE.hook(hook))
    return stack.close


def _dead_holder() -> bytes:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout)}).encode()


def test_a_takeover_never_overwrites_a_lock_taken_after_its_look(bucket: str) -> None:
    """Two builds find the same dead lock: the one whose takeover comes second must not
    overwrite the lock the first took (that would be two writers of one store)."""
    import boto3

    out = store_path(f"{bucket}/s.zarr")
    lock = f"{bucket}/s.zarr/_nostall/build.lock"
    location(lock).write_bytes(_dead_holder())
    other = boto3.session.Session().client("s3")
    b, key = bucket_and_key(lock)
    first = {"host": "other-host", "pid": 7}

    def other_takes_it() -> None:  # the other build's takeover lands between look and PUT
        other.put_object(Bucket=b, Key=key, Body=json.dumps(first).encode())

    unhook = _hook_before("PutObject", key, other_takes_it, skip="If-None-Match")  # takeover
    try:
        with pytest.raises(BuildLockedError, match="held by other-host pid 7"), build_lock(out):
            pass
    finally:
        unhook()
    assert json.loads(location(lock).read_bytes()) == first


def test_a_build_whose_lock_was_taken_over_leaves_it_to_its_new_holder(bucket: str) -> None:
    out = store_path(f"{bucket}/s.zarr")
    lock = f"{bucket}/s.zarr/_nostall/build.lock"
    taker = json.dumps({"host": "other-host", "pid": 9}).encode()
    with build_lock(out):
        location(lock).write_bytes(taker)  # e.g. deleted by hand, then taken by another build
    assert location(lock).read_bytes() == taker  # not deleted by the first build's release


def test_a_lock_released_while_looked_at_is_created_again(bucket: str) -> None:
    out = store_path(f"{bucket}/s.zarr")
    lock = f"{bucket}/s.zarr/_nostall/build.lock"
    location(lock).write_bytes(json.dumps({"host": "other-host", "pid": 3}).encode())
    b, key = bucket_and_key(lock)
    import boto3

    other = boto3.session.Session().client("s3")
    unhook = _hook_before("GetObject", key, lambda: other.delete_object(Bucket=b, Key=key))
    try:
        with build_lock(out):  # the holder finished between the refused PUT and the look
            assert json.loads(location(lock).read_bytes())["pid"] == os.getpid()
    finally:
        unhook()
    with pytest.raises(FileNotFoundError):
        location(lock).read_bytes()


def test_outputs_other_than_object_store_urls_are_refused() -> None:
    with pytest.raises(StoreError, match=r"--out ftp://b/x: must be a local path or an object-"):
        check_output("ftp://b/x")
    with pytest.raises(StoreError, match="not an s3://bucket/key URL"):
        check_output("s3:///x")


def test_create_refuses_foreign_objects_and_resume_refuses_another_spec(any_bucket: str) -> None:
    from precompute import BuildSpec, StoreMismatchError
    from precompute.format.layout import StoreLayout
    from precompute.pipeline.writer import create_or_resume

    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2)
    layout = StoreLayout.from_spec(spec, 10)
    location(f"{any_bucket}/other/notes.txt").write_bytes(b"not a store")
    with pytest.raises(StoreError, match=rf"{any_bucket}/other: is not empty .*other/notes.txt"):
        create_or_resume(store_path(f"{any_bucket}/other"), spec, layout, "fp")
    out = store_path(f"{any_bucket}/s.zarr")
    assert create_or_resume(out, spec, layout, "fp") == set()
    assert create_or_resume(out, spec, layout, "fp") == set()  # resumable, nothing done yet
    with pytest.raises(StoreMismatchError, match=r"seed: 0 \(store\) vs 1 \(this command\)"):
        create_or_resume(
            out, BuildSpec(size=16, shard_samples=4, chunk_samples=2, seed=1), layout, "fp"
        )


def test_the_writer_into_s3_gives_the_objects_of_the_local_files(
    any_bucket: str, tmp_path: Path
) -> None:
    import numpy as np

    from precompute import BuildSpec
    from precompute.pipeline.writer import write_store_from_arrays

    spec = BuildSpec(size=8, shard_samples=4, chunk_samples=2)
    images = np.random.default_rng(0).integers(0, 256, (10, 8, 8, 3), dtype=np.uint8)
    labels = np.arange(10) % 3
    write_store_from_arrays(tmp_path / "local", images, labels, spec)
    url = f"{any_bucket}/w.zarr"
    write_store_from_arrays(store_path(url), images, labels, spec)
    local = {
        p.relative_to(tmp_path / "local").as_posix(): p.read_bytes()
        for p in (tmp_path / "local").rglob("*")
        if p.is_file() and p.name != "build.lock"
    }
    remote = objects_under(url)
    assert remote == local  # every object, markers and metadata included


def test_replace_removes_a_store_of_another_spec_and_nothing_else(any_bucket: str) -> None:
    """``--replace`` in object storage: the store's objects (the held lock kept), no neighbour."""
    import numpy as np

    from precompute import BuildSpec
    from precompute.format.layout import StoreLayout
    from precompute.pipeline.replace import replace_other
    from precompute.pipeline.writer import create_or_resume, write_store_from_arrays

    spec = BuildSpec(size=8, shard_samples=4, chunk_samples=2)
    images = np.zeros((10, 8, 8, 3), dtype=np.uint8)
    url = f"{any_bucket}/r.zarr"
    out = store_path(url)
    write_store_from_arrays(out, images, np.arange(10) % 3, spec)
    location(f"{any_bucket}/r.zarr.txt").write_bytes(b"beside")  # a neighbour of the prefix
    other = BuildSpec(size=6, shard_samples=4, chunk_samples=2)
    layout = StoreLayout.from_spec(other, 10)
    replaced = replace_other(out, spec, StoreLayout.from_spec(spec, 10), "fp")
    assert replaced is not None and replaced.startswith("source: another source")
    write_store_from_arrays(out, images, np.arange(10) % 3, spec)
    location(f"{url}/notes.txt").write_bytes(b"someone's")
    before = objects_under(url)
    with pytest.raises(StoreError, match=r"notes\.txt, which is not part of its store"):
        replace_other(out, other, layout, "fp")
    assert objects_under(url) == before  # nothing deleted
    location(f"{url}/notes.txt").delete()
    with build_lock(out):
        replaced = replace_other(out, other, layout, "fp")
        assert replaced is not None and replaced.startswith("size: 8 (store) vs 6 (this command);")
        assert list(objects_under(url)) == ["_nostall/build.lock"]  # the held lock stays
    assert objects_under(url) == {}
    assert location(f"{any_bucket}/r.zarr.txt").read_bytes() == b"beside"
    assert create_or_resume(out, other, layout, "fp") == set()  # a new store there
